#!/bin/bash
# One device call (issue 17): tune kernels in the program variants the granule compiles, for the
# package's database of tuned schedules (icoforge/backend/schedule/tuned_schedules.json).
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_tune_granule.sh")
#   run(carry=[".whl"], timeout_s=600, command="CONFIG='REGIONAL 80' bash scripts/device/run_tune_granule.sh")
#
# The granule compiles programs with icon4py's static arguments; where they change a kernel's code,
# an entry tuned on the suite's inputs does not apply there (session 16: three of nine). The values
# below are the granule's on R2B6/80 (benchmarks/granule-variants.md, scripts/dev/granule_variants.py;
# a GPU run's log prints them too). Each line of TUNES: PROGRAM [NAME=VALUE ...].
# Results: $OUT/tune-NN-PROGRAM.json (icoforge tune --json; NN the line of TUNES, as a program can be
# tuned in two variants) and .md, logs, all in $OUT/tune.tgz (a call returns at most 8 files). Then, here: `python -m icoforge.tune.database $files --measured
# benchmarks/h200-.../` and commit.
# Knobs: CONFIG ("R2B6 80"), SET (single: REGIONAL's single-kernel programs), ONLY (a grep -E pattern: only
#        the lines of TUNES it matches, e.g. ONLY=rho_theta), SPACE (full), JOBS (12), END_S (560: stop the tune running then),
#        APPLY (a benchmarks/ path: add the results to this copy's database at once, recorded as measured
#        there, and return it as $OUT/tuned_schedules.json, so that a greenline later in the same call
#        runs with them; here the same command on the returned JSONs gives the same database).

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
read -r GRID LEVELS <<< "${CONFIG:-R2B6 80}"
export PYTHONUNBUFFERED=1
R2B6_TUNES="compute_rho_theta_pgrad_and_update_vn nflat_gradp=79 nflatlev=16
compute_advection_in_horizontal_momentum end_index_of_damping_layer=79
compute_advection_in_corrector_vertical_momentum end_index_of_damping_layer=79"
# REGIONAL/80 (limited area; benchmarks/granule-variants-REGIONAL-80.md): the variants' static values,
# horizontal bounds included. Checked on the workstation (scripts/dev/tune_fingerprints.py): they give
# the fingerprints session 19's REGIONAL run logged (rho_theta k4 52d2da33795e69f5, horizontal
# advection k2 56b4b9e03fe280c9, horizontal velocity k0 aaf737c8590c253e), and every other kernel of
# these programs the fingerprint of its R2B6 entry (left out there only for the size class).
REGIONAL_TUNES="compute_rho_theta_pgrad_and_update_vn end_edge_halo=67232 end_edge_local=67232 end_edge_nudging=6916 horizontal_end=67232 horizontal_start=0 is_iau_active=False limited_area=True nflat_gradp=79 nflatlev=16 start_edge_lateral_boundary=0 start_edge_lateral_boundary_level_7=4824 start_edge_nudging_level_2=6916
compute_horizontal_velocity_quantities_and_fluxes nflatlev=16 horizontal_start=3234 horizontal_end=67232 vertical_start=0 vertical_end=81
compute_advection_in_horizontal_momentum apply_extra_diffusion_on_vn=True end_index_of_damping_layer=79 horizontal_start=6916 horizontal_end=67232 vertical_start=0 vertical_end=80
compute_advection_in_corrector_vertical_momentum end_index_of_damping_layer=79 horizontal_start=3210 horizontal_end=44640 vertical_start=0 vertical_end=80"
# R2B6/120: no entry applied in session 20 (the level count is compiled into the code); these values
# (from its log) give the fingerprints it printed for every stale kernel (checked on the workstation
# on R2B4/120: the fingerprint leaves the horizontal bounds out)
R2B6_120_TUNES="compute_rho_theta_pgrad_and_update_vn end_edge_halo=491520 end_edge_local=491520 end_edge_nudging=0 horizontal_end=491520 horizontal_start=0 is_iau_active=False limited_area=False nflat_gradp=119 nflatlev=27 start_edge_lateral_boundary=0 start_edge_lateral_boundary_level_7=0 start_edge_nudging_level_2=0 vertical_end=120 vertical_start=0
compute_horizontal_velocity_quantities_and_fluxes horizontal_end=491520 horizontal_start=0 nflatlev=27 vertical_end=121 vertical_start=0
compute_advection_in_horizontal_momentum apply_extra_diffusion_on_vn=True end_index_of_damping_layer=119 horizontal_end=491520 horizontal_start=0 vertical_end=120 vertical_start=0
compute_advection_in_corrector_vertical_momentum end_index_of_damping_layer=119 horizontal_end=327680 horizontal_start=0 vertical_end=120 vertical_start=0"
# SET=single: the three single-kernel programs slower than dace_gpu per call on REGIONAL/80 in session 23
# (averaged vn 1.03x, divergence damping 1.14x, interpolation/buoyancy 1.11x), in the variants the
# granule's steps call (scripts/dev/granule_variants.py --grid REGIONAL --levels 80 --only-used-variants)
# with their float static values too (icon4py binds the weights at compile time): checked with
# scripts/dev/tune_fingerprints.py, they give the granule's fingerprints (divergence damping k0
# a6c41de1b0cfe109, averaged vn k0 c077f33171f7c705 / 20f34905c35ff699, interpolation/buoyancy k0 baa9d77b1554d187)
REGIONAL_SINGLE_TUNES="apply_divergence_damping_and_update_vn advection_explicit_weight_parameter=0.25 advection_implicit_weight_parameter=0.75 apply_2nd_order_divergence_damping=True apply_4th_order_divergence_damping=False dbl_eps=2.220446049250313e-16 divdamp_order=24 horizontal_end=67232 horizontal_start=6916 is_iau_active=False limited_area=True max_nudging_coefficient=0.375 mean_cell_area=389176284.9485715 vertical_end=80 vertical_start=0
compute_averaged_vn_and_fluxes at_first_substep=False horizontal_end=67232 horizontal_start=3234 prepare_advection=True vertical_end=80 vertical_start=0
compute_averaged_vn_and_fluxes at_first_substep=True horizontal_end=67232 horizontal_start=3234 prepare_advection=True vertical_end=80 vertical_start=0
compute_interpolation_and_nonhydro_buoy horizontal_end=44640 horizontal_start=2152 rhotheta_explicit_weight_parameter=0.6 rhotheta_implicit_weight_parameter=0.4 vertical_end=80 vertical_start=1
$(head -1 <<< "$REGIONAL_TUNES")"  # and rho_theta again: the full space has register caps below 64 since session 23
case "$GRID $LEVELS${SET:+ $SET}" in
  "REGIONAL 80 single") DEFAULT_TUNES=$REGIONAL_SINGLE_TUNES ;;
  "R2B6 120") DEFAULT_TUNES=$R2B6_120_TUNES ;;
  "R2B6 80") DEFAULT_TUNES=$R2B6_TUNES ;;
  "REGIONAL 80") DEFAULT_TUNES=$REGIONAL_TUNES ;;
  *) DEFAULT_TUNES="" ;;
esac
TUNES=${TUNES:-$DEFAULT_TUNES}
[ -n "${ONLY:-}" ] && TUNES=$(grep -E "$ONLY" <<< "$TUNES")
[ -n "$TUNES" ] || { echo "run_tune_granule.sh: no granule values for $GRID/$LEVELS; give TUNES" >&2; exit 2; }
W=/tmp/tune-granule; mkdir -p $W
deadline ${END_S:-560} "icoforge tune" & KILLER=$!

n=0
while read -r program values; do
  [ -z "$program" ] && continue
  n=$((n + 1)); f=$W/tune-$(printf %02d $n)-$program
  flags=""; for v in $values; do flags="$flags --static-value $v"; done
  stamp "tune $program ($GRID/$LEVELS${values:+, $values})"
  python3 -m icoforge tune $program --grid $GRID --levels $LEVELS --backend icoforge-cuda \
    --space ${SPACE:-full} --jobs ${JOBS:-12} $flags --json $f.json --markdown $f.md > $f.log 2>&1
  stamp "done (rc $?): $(grep -E 'whole call' $f.log | tail -1 | cut -c1-160)"
  tar czf $OUT/tune.tgz -C $W .   # what is done survives a cut-off call
done <<< "$TUNES"
stop_bg $KILLER
if [ -n "${APPLY:-}" ]; then
  python3 -m icoforge.tune.database $W/tune-*.json --measured "$APPLY" && cp icoforge/backend/schedule/tuned_schedules.json $OUT/
fi
