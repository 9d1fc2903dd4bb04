"""Record: plain data classes for the modules on `zkqueue prove`'s start-up path.

What `@dataclass` gives those classes (a constructor taking the fields by position or
keyword, defaults, repr, field-wise ==, and for frozen ones immutability and a hash),
without importing `dataclasses`: it imports inspect (and ast, dis, tokenize with it) and
compiles each class's methods with exec, about 10 ms plus 1 ms a class of every one-shot
prove's start-up. groth16/model.py's Proof and VerificationKey stay dataclasses (callers
use dataclasses.replace on them); the native prove's command line never builds them.

    class Point(Record):
        x: int
        y: int = 0          # a default: the class attribute of the field's name
        _frozen = True      # assignments after __init__ raise; instances are hashable
"""

from __future__ import annotations


class Record:
    """A class whose fields are its annotations, in order (a base class's come first).

    A field whose class attribute is set has that default; a mutable default is copied for
    each instance (as a dataclass's default_factory would make it).
    """

    _frozen = False
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = tuple(cls.__dict__.get("__annotations__", {}))
        cls._fields = tuple(n for n in cls._fields if n not in own) + own
        if cls._frozen:
            cls.__hash__ = Record._frozen_hash

    def __init__(self, *args, **kwargs):
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, got {len(args)}")
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name not in fields or name in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated argument {name!r}")
            values[name] = value
        for name in fields:
            if name not in values:
                if not hasattr(type(self), name):
                    raise TypeError(f"{type(self).__name__}() missing argument {name!r}")
                default = getattr(type(self), name)
                values[name] = default.copy() if isinstance(default, (dict, list, set)) else default
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name, value):
        if self._frozen:
            raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self._frozen:
            raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")
        object.__delattr__(self, name)

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in self._fields)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # as a mutable dataclass's: == compares fields, so no identity hash

    def _frozen_hash(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._fields)})"


class computed_once:  # noqa: N801 - a decorator, named as functools.cached_property is
    """functools.cached_property for Records, without importing functools (it brings
    collections: about 2 ms of `zkqueue prove`'s start-up). The first access computes the
    value and stores it in the instance's __dict__, which later accesses then read."""

    def __init__(self, compute):
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.compute(obj)
        return value
