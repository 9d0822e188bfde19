"""The architectures of ``devtools.standins`` (one module per stand-in, ``SPEC`` and ``build()``);
``devtools.standins.module(name)`` imports them. Here rather than beside the registry: see
``devtools.lib``."""
