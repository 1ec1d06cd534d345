"""The secure stages: one audited implementation of each primitive every protocol calls.

Thesis 003, 4.2.1; ``docs/security.md`` ("Secure stages") states each stage's leakage and
the chosen-input attacks its tests run (``tests/protocols/test_stages.py``).

* :mod:`~protocols.stages.blinds` -- the one blinding rule: smooth additive blinds
  (sums of uniform integers), their Fisher information and the estimation floor.
* :mod:`~protocols.stages.fixedlog` -- exact fixed-point log and exp of big integers.
* :mod:`~protocols.stages.logsum` -- secure LOGSUM (forward v1 and v2, keyword, speaker):
  the plan (public sizes, scales, slot packing, noise), Alice's half, Bob's half.
* :mod:`~protocols.stages.emissions` -- encrypted emissions from packed frames (forward,
  keyword, speaker): the shared-base multi-exponentiation path.

The decision stage (argmax, also against a reference model) is :mod:`protocols.decision`:
it builds on the comparison plugin :mod:`protocols.compare`, which itself uses the
masked multiplication of :mod:`protocols.primitives`, so it sits beside them.  A stage
has a plan (public sizes, bounds, the randomizers it draws: ``plan.edges`` encryptions
for Alice, ``plan.ciphertexts`` re-randomisations for Bob), Alice's half, Bob's half and
its security statement; a check on private data defers its error to after the last
message through ``ctx.defer``.
"""
