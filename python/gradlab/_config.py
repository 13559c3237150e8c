"""A run's settings as the engine takes them: (key, text) pairs with `gradlab train`'s keys,
from a dict or from a config file's `key = value` lines."""

import os


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def settings(config):
    """config: a dict (keys as `gradlab train`'s flags: "d-model" or "d_model"), or the path of
    a config file."""
    if isinstance(config, (str, os.PathLike)):
        return read_config_file(config)
    return [(str(key).replace("_", "-"), _text(value)) for key, value in config.items()]


def read_config_file(path):
    pairs = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if "=" not in line:
                raise ValueError(f"{os.fspath(path)}:{number}: expected key = value, got {line!r}")
            key, value = (part.strip() for part in line.split("=", 1))
            pairs.append((key, value))
    return pairs
