"""Stage 3, passes: kernel IR to kernel IR.

Takes an `ir.ProgramIR` and gives an equivalent one (bit-identical results): copies forwarded
(`forward`), temporaries recomputed in their readers (`inline`), loop-invariant code hoisted
(`hoist`), kernels ordered (`order`) and fused (`fuse`). Which of them run, and how, the schedule
stage decides (`schedule.pipeline`).
"""
