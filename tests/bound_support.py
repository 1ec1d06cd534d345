"""What Alice decrypts of a bound program (protocols/stages/bound.py), and the KS tests of
the chosen-frame attack: every slot uniform over its whole signed range, and the bits
above the slots uniform too (the stage's top mask), whatever the frames."""

from __future__ import annotations

import numpy as np
from scipy import stats
from transcript_harness import VIEW_P_MIN as P_MIN

from protocols.stages.emissions import alice_unpack


def alice_view(emit, keypair, bound):
    """The residues Alice decrypts from ``bd.values``, read as the stage reads them:
    (slots (T, columns), the parts above the slots as fractions of their range)."""
    n = int(keypair[0].n)
    residues = emit.decrypt_residues(keypair[1])
    slots = np.array(alice_unpack(residues, bound.layout), dtype=object)
    packed_bits = bound.layout.plan.slots * bound.layout.plan.slot_bits  # the slots' W bits
    top = [(v >> packed_bits) / (n >> packed_bits) for v in residues]
    return slots, top


def assert_uniform_view(emit, keypair, bound, scaled_truth) -> np.ndarray:
    """KS tests of Alice's view against Bob's true values (``scaled_truth``, (T, rows) at
    the program's scale): the value slots' masks, each MAC limb and the top part are
    uniform.  Returns the value masks as fractions of a slot, in [-1/2, 1/2)."""
    slots, top = alice_view(emit, keypair, bound)
    width = float(1 << bound.share_bits)
    half = float(1 << (bound.value_bits - 1))
    values = slots[:, : bound.rows].astype(float)
    masks = (values - half - np.asarray(scaled_truth, dtype=float)) / width
    assert stats.kstest(masks.ravel() + 0.5, "uniform").pvalue > P_MIN
    for limb in (slots[:, bound.rows :].astype(float) / width + 0.5).T:
        assert stats.kstest(limb, "uniform").pvalue > P_MIN  # each MAC limb under its mask
    assert stats.kstest(top, "uniform").pvalue > P_MIN
    return masks
