"""A gradlab configuration file (`key = value` lines, `#` comments) as a dict of strings."""


def read_config(path):
    config = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                key, value = (part.strip() for part in line.split("=", 1))
                config[key] = value
    return config
