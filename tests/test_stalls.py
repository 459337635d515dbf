"""icoforge.stalls: the one rule both the greenline's and the model's reports name stalls by."""

from icoforge.stalls import STALL_FACTOR, stall_positions


def test_samples_above_twice_the_median_are_stalls_and_the_rest_are_not():
    assert STALL_FACTOR == 2.0
    assert stall_positions([10.0, 10.1, 488.5, 20.5, 19.9, 9.9, 10.0]) == [2, 3]  # median 10.0: 19.9 is no stall
    assert stall_positions([]) == [] and stall_positions([0.0, 0.0, 1.0]) == []  # no median, no stall
    assert stall_positions([1.0, 1.0, 1.4], factor=1.3) == [2]
