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

* :mod:`~protocols.stages.decision` -- the one decision stage (argmax, thresholds, a
  reference model), on garbled circuits or the DGK comparisons of
  :mod:`~protocols.stages.dgk`, which use the masked multiplication of
  :mod:`~protocols.stages.primitives`.
* :mod:`~protocols.stages.decoding` -- secure Viterbi decoding (the ``viterbi``
  protocol, keyword recognition, spotting, connected digits), on the forward algorithm's
  public sizes and Alice's encoding (:mod:`~protocols.stages.forward_scoring`) and the
  max-plus circuits (:mod:`~protocols.stages.maxplus`).

A protocol module (``protocols/<name>.py``) is a plugin: parameters, roles, budget,
example and descriptor; it imports stages and never another protocol (an import-linter
contract).  A stage
has a plan (public sizes, bounds, the randomizers it draws: ``plan.edges`` encryptions
for Alice, ``plan.ciphertexts`` re-randomisations for Bob), Alice's half, Bob's half and
its security statement; a check on private data defers its error to after the last
message through ``ctx.defer``.
"""
