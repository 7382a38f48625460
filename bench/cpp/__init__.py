"""Hand-written C++ peers of the field's problems (W8 GMM, W9 bundle adjustment), built on first use.

`bench.cpp.build.load` compiles a source file of this directory into a
shared library and loads it with ctypes.
"""
