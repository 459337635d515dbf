"""Stage 2, lowering: GTIR to kernel IR.

Takes the GTIR the frontend gives (`itir.Program`, argument types, offset provider types) and gives
one `ir.ProgramIR`: kernels as loops of statements over field loads, host conditionals, temporaries.
`lower` drives a program, `lower_fields` its field-level statements (early GTIR), `lower_stencil`
the partial evaluation of one stencil, `lower_values` the compile-time values they share; in that
order each imports only the ones below it.
"""
