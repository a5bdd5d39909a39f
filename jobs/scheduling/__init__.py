"""The pure scheduling core of Tidepool: standard library only, the clock passed in.

`make core` compiles every module of the core but this one, `__main__` and `_loader` with
mypyc into `build/core/`; `_loader.load()`, called once at a process's start, puts that build
first on this package's path while it matches the sources. Importing the core does neither.
"""
