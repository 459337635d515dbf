"""Where a program stands against the hardware, and what the compiler made of it.

Modules (each small, data flowing one way):
  model     -- compulsory bytes and flops per kernel from the IR and one call's sizes
  sizes     -- those sizes for a suite program on a grid, without allocating fields
  static    -- the kernel IR as the suite compiles it (int/bool scalars static)
  timing    -- whole-call, per-kernel (CPU: one module per kernel; GPU: events) and copy ceiling
  roofline  -- the PNG and the Markdown table
  measure   -- one measurement of a program: model + times + ceiling -> roofline files
  profile   -- ncu / nsys / rocprof command lines and parsers
  explain   -- the pages of `icoforge explain`
"""
