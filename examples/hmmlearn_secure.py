"""A fitted hmmlearn model scored and decoded securely, in-process (docs/api.md)."""

import numpy as np
from hmmlearn import hmm

from smc_hmm.api import SecureHMM

rng = np.random.default_rng(0)
X, lengths = np.concatenate([rng.normal(size=(20, 2)), rng.normal(3, 1, (20, 2))]), [20, 20]
model = hmm.GaussianHMM(n_components=3, random_state=0, n_iter=50).fit(X, lengths)
secure = SecureHMM(model, key_bits=1024, insecure=True)  # a quick try: 2048 bits is the default
print("hmmlearn score:", repr(model.score(X, lengths)), "secure:", repr(secure.score(X, lengths)))
print("hmmlearn decode:", model.decode(X[:20])[1], "secure:", secure.decode(X[:20])[1])
print("weights raised to the floor:", secure.adjustment.raised)
