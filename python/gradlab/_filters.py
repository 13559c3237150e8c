"""Hook filters as TransformerLens takes them (a name, a list of names, a glob, a predicate),
turned into the names and globs the engine matches."""

import fnmatch


def patterns(names_filter, point_names):
    """The names or globs names_filter stands for; point_names() gives the model's point names,
    asked for a predicate only."""
    if names_filter is None:
        return ["*"]
    if isinstance(names_filter, str):
        return [names_filter]
    if callable(names_filter):
        chosen = [name for name in point_names() if names_filter(name)]
        if not chosen:
            raise KeyError(f"the names filter {names_filter!r} matches no hook point of this model")
        return chosen
    names = list(names_filter)
    if not all(isinstance(name, str) for name in names):
        raise TypeError("names_filter: expected a name, a glob, a list of them or a predicate")
    return names


def matches(pattern, name):
    """Whether a name or glob ('*' any run of characters, '?' one) names the point."""
    return fnmatch.fnmatchcase(name, pattern)
