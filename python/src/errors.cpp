// The library's exceptions as Python's own types, with the library's message: a bad shape, dtype
// or value is a ValueError, an id out of range an IndexError, a missing or damaged checkpoint
// FileNotFoundError or OSError (naming the path).
#include <filesystem>

#include "autograd/error.h"
#include "python/src/bindings.h"

namespace gradlab::python {

void bind_errors(py::module_&) {
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const Error& e) {  // shape, axis, dtype, configuration
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const CheckpointError& e) {
      // The message starts with the path: "<path>: <item>: <problem>".
      const std::string message = e.what();
      const std::string path = message.substr(0, message.find(": "));
      std::error_code ignored;
      PyErr_SetString(
          std::filesystem::exists(path, ignored) ? PyExc_OSError : PyExc_FileNotFoundError,
          e.what());
    } catch (const FileError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const GraphError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace gradlab::python
