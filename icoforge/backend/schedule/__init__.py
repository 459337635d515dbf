"""Stage 4, schedule: how the kernels of a program run.

Takes an `ir.ProgramIR` and a `ProgramSchedule` (user JSON, the vendor default, or the tuned
database `tuned_schedules.json` read by `tuned`) and gives the program the code generators print:
the passes run as the schedule asks (`pipeline`) and one `KernelLaunch` per kernel (block shape,
k loop, shared-memory tables, index width). `access` and `occupancy` are the memory-access and
occupancy models that both choosing a schedule and the code generators use.
"""
