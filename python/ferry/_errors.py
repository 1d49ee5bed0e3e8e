"""ferry's exceptions. Every error the C++ library reports (``ferry::Error``) is raised as one of these, with the
library's message; each is both a :class:`ferry.Error` and the built-in exception of its kind."""


class Error(Exception):
    """Base class of ferry's errors. ``str(e)`` is the full message; ``problem`` says what went wrong, ``where`` the
    file, tensor, module or argument concerned (may be empty), ``hint`` what to do about it (may be empty)."""

    problem: str = ""
    where: str = ""
    hint: str = ""


class NotFoundError(Error, FileNotFoundError):
    """A model folder, checkpoint shard, config.json or tokenizer.json that does not exist."""


class OutOfMemoryError(Error, MemoryError):
    """A memory budget too small for the model (with disk offload refused), or an allocation that failed."""


class InvalidValueError(Error, ValueError):
    """Any other problem: a bad argument, config or device map, an unknown architecture, a corrupt file."""
