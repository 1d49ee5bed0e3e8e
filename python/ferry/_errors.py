"""ferry's exceptions. Every error the C++ library reports (``ferry::Error``) is raised as one of these, with the
library's message; each is both a :class:`ferry.Error` and the built-in exception of its kind. The class follows the
kind the library gives the error where it throws it (``ferry::ErrorKind``), not the wording of the message, so
``except FileNotFoundError`` keeps catching a missing file when a message is reworded."""


class Error(Exception):
    """Base class of ferry's errors. ``str(e)`` is the full message; ``problem`` says what went wrong, ``where`` the
    file, tensor, module or argument concerned (may be empty), ``hint`` what to do about it (may be empty).
    ``kind`` names the kind, one per subclass: ``"not_found"`` (:class:`NotFoundError`), ``"out_of_memory"``
    (:class:`OutOfMemoryError`) or ``"invalid_value"`` (:class:`InvalidValueError`)."""

    kind: str = "invalid_value"
    problem: str = ""
    where: str = ""
    hint: str = ""


class NotFoundError(Error, FileNotFoundError):
    """A file, folder, checkpoint shard, tensor file or model that is not there: a model folder, a shard named by
    the index, config.json or tokenizer.json that does not exist. A file that exists but cannot be read or parsed is
    an :class:`InvalidValueError`."""

    kind = "not_found"


class OutOfMemoryError(Error, MemoryError):
    """A memory budget too small for the model or the plan (with disk offload refused), or an allocation that
    failed."""

    kind = "out_of_memory"


class InvalidValueError(Error, ValueError):
    """Any other problem: a bad argument, config or device map, an unknown architecture, a corrupt file."""

    kind = "invalid_value"
