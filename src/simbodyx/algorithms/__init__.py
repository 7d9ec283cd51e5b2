"""One algorithm per module, each written against :mod:`simbodyx.tree`."""
