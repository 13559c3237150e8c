# Links the objects of one kernel variant (autograd/kernels/variants.h) into one relocatable
# object in which every symbol but the variant's table is local: code compiled for one
# instruction set, down to the std:: and Eigen functions it instantiates, then serves that
# variant alone. Run by autograd/CMakeLists.txt with
#   -DLINKER= -DOBJCOPY= -DNM= -DOUTPUT= -DSYMBOL= -DOBJECTS=a.o|b.o|...
string(REPLACE "|" ";" objects "${OBJECTS}")
execute_process(COMMAND ${LINKER} -r --force-group-allocation -o ${OUTPUT} ${objects}
  RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "linking the kernel variant ${SYMBOL} failed")
endif()
execute_process(COMMAND ${OBJCOPY} --keep-global-symbol=${SYMBOL} ${OUTPUT} RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "localising the symbols of the kernel variant ${SYMBOL} failed")
endif()
# An entry point the variant's sources do not define would bind to dispatch.cpp's, which calls
# the variant again: refuse to build rather than recurse at run time.
execute_process(COMMAND ${NM} --undefined-only ${OUTPUT} OUTPUT_VARIABLE undefined)
string(REGEX MATCHALL "_ZN7gradlab7kernels[A-Za-z0-9_]*" missing "${undefined}")
if(missing)
  file(REMOVE ${OUTPUT})
  message(FATAL_ERROR "the kernel variant ${SYMBOL} does not define: ${missing}")
endif()
