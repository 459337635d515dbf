"""The kernel IR that every later stage passes along (`ir`), its scalar types (`dtypes`), and the
analyses and rewrites on it that lowering, the passes and the schedule share (`recompute`: a
temporary recomputed in its readers; `own_point`).

Takes nothing from the other stages (imports no other backend package); gives the vocabulary.
"""
