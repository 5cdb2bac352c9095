"""Native (C++) kernels built by the package where PyTorch has no fast path; start at :mod:`.native_step`.

Each kernel has a pure-PyTorch fallback that computes the same thing, used whenever the kernel cannot be built
(no C++ compiler, no ninja) or does not cover the model; the choice and its reason are logged.
"""
