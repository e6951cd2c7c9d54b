"""A module whose import fails with something other than ImportError."""

raise RuntimeError("this module cannot be imported")
