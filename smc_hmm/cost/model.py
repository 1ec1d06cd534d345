"""The cost model: predicted running time from primitive rates and a cost report.

One responsibility: *predict*.  See ``docs/architecture.md`` ("The cost
ledger").  :class:`CostModel` predicts running time from primitive rates
(:class:`PrimitiveRates`, measured by :func:`smc_hmm.bench.rates.measure_rates`),
a :class:`~smc_hmm.cost.report.CostReport`, a target key size, an input-size
factor and a network (latency, bandwidth).  Scaling assumption, measured with
gmpy2 between 1024- and 2048-bit keys and stated in :data:`SCALING_EXPONENTS`:

* operations that are a modular exponentiation with an exponent as long as the
  key (encryption -- the DJN randomizer h_s^alpha with |alpha| = bits/2 --,
  CRT decryption, re-randomisation) cost ~ bits^2.7 (bits multiplications of
  cost ~ bits^1.6 each; GMP's sub-quadratic multiplication);
* a homomorphic addition is one multiplication mod n^2: ~ bits^1.6;
* a scalar multiplication or multi-exponentiation term with a fixed-size
  (e.g. 64-bit fixed-point) exponent costs a fixed number of multiplications
  plus reductions: ~ bits^1.75; where the ledger also counts the exponents'
  total bits (``multiexp_bits``), a multi-exponentiation costs that many bits
  at the measured per-term rate of ``scalar_bits``-bit exponents, and where it
  counts the modular multiplications the algorithm spends (``multiexp_mults``,
  :func:`smc_hmm.crypto.multiexp.multiplication_count`: few long rows over shared
  bases cost far less per bit than many short ones), each is priced as one
  homomorphic addition -- those the native kernel computes (``native_mults``,
  :mod:`smc_hmm.crypto.native`) at its own measured rate (``native_mul``) where the
  rates have one;
* where the ledger counts a scalar multiplication's exponent bits
  (``scalar_mul_bits``: :class:`~smc_hmm.crypto.cipherarray.CipherArray` does), its
  scalar multiplications cost those bits at the measured rate of ``scalar_bits``-bit
  scalars, and each inversion of a negative factor (``invert``) its own measured rate
  (one extended gcd modulo n^2: ~ bits^0.9, measured 17 us at 1024 and 32 us at 2048
  bits); a factor of 1 or -1 then costs next to nothing, as it does;
* OT and comparison invocations cost nothing extra in the model: their
  encryptions, decryptions and exponentiations are counted as primitive
  operations already;
* the garbled stage (:mod:`smc_hmm.gc`) is priced where the rates have it
  (:func:`smc_hmm.bench.rates.garbling_rates`), independent of the key size: per AND
  gate garbled and evaluated (``and_gates``), per layer of a circuit (``gc_layers``: the
  array calls each layer costs, whatever its width) and per random correlated OT of the
  extension (``cot``), both parties' work counted at the garbler, and per byte of
  garbled tables sent (``garbled_bytes``: their trip through the wire codec).

Network time is ``latency * rounds + bytes / bandwidth``.  Encoded bytes are
scaled linearly with the key size (ciphertexts and keys dominate the traffic)
and, like operation counts, linearly with the input-size factor; rounds do not
change with either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from smc_hmm.cost.ledger import OPS
from smc_hmm.crypto.keys import check_key_bits
from smc_hmm.errors import ConfigError, InvalidInputError

if TYPE_CHECKING:
    from smc_hmm.cost.report import CostReport

#: Primitive crypto operations with a cost in the model (OT and comparison are composites).
CRYPTO_OPS: tuple[str, ...] = OPS[:6]
#: Cost of one operation ~ bits ** exponent (measured 1024 -> 2048 bits, gmpy2 2.3).
SCALING_EXPONENTS: dict[str, float] = {
    "encrypt": 2.7,
    "decrypt": 2.7,
    "rerandomize": 2.7,
    "add": 1.6,
    "scalar_mul": 1.75,
    "multiexp_terms": 1.75,
    "invert": 0.9,
    "native_mul": 1.7,
    "and_gates": 0.0,
    "gc_layers": 0.0,
    "cot": 0.0,
    "garbled_bytes": 0.0,
}
#: Measured where the rates have them (older rate files do not), priced apart.
OPTIONAL_OPS: tuple[str, ...] = (
    "invert",
    "native_mul",
    "and_gates",
    "gc_layers",
    "cot",
    "garbled_bytes",
)


@dataclass
class PrimitiveRates:
    """Measured operations per second at one key size (single thread)."""

    bits: int
    rates: dict[str, float]
    scalar_bits: int = 64
    exponents: dict[str, float] = field(default_factory=lambda: dict(SCALING_EXPONENTS))

    def __post_init__(self) -> None:
        if not isinstance(self.bits, int) or self.bits < 2:
            raise InvalidInputError(f"bits must be a positive integer, got {self.bits!r}")
        self.exponents = {**SCALING_EXPONENTS, **self.exponents}
        for op in (*CRYPTO_OPS, *(op for op in OPTIONAL_OPS if op in self.rates)):
            rate = self.rates.get(op)
            if not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
                raise InvalidInputError(
                    f"rate for {op!r} must be a finite number > 0, got {rate!r}"
                )
            if op not in self.exponents:
                raise InvalidInputError(f"no scaling exponent for {op!r}")

    def seconds_per(self, op: str, bits: int | None = None) -> float:
        """Seconds for one ``op`` at ``bits`` (scaled as (bits / measured)^exponent)."""
        if op not in CRYPTO_OPS and not (op in OPTIONAL_OPS and op in self.rates):
            return 0.0  # composite (OT, comparison): its primitives are counted separately
        base = 1.0 / self.rates[op]
        if bits is None or bits == self.bits:
            return base
        return base * (bits / self.bits) ** self.exponents[op]

    def at(self, bits: int) -> PrimitiveRates:
        """The predicted rates at another key size."""
        return PrimitiveRates(
            bits,
            {
                op: 1.0 / self.seconds_per(op, bits)
                for op in (*CRYPTO_OPS, *OPTIONAL_OPS)
                if op in self.rates
            },
            self.scalar_bits,
            dict(self.exponents),
        )

    def to_dict(self) -> dict:
        return {
            "bits": self.bits,
            "rates": dict(sorted(self.rates.items())),
            "scalar_bits": self.scalar_bits,
            "exponents": dict(sorted(self.exponents.items())),
        }

    @classmethod
    def from_dict(cls, d) -> PrimitiveRates:
        try:
            return cls(
                int(d["bits"]),
                {k: float(v) for k, v in d["rates"].items()},
                int(d.get("scalar_bits", 64)),
                {k: float(v) for k, v in d.get("exponents", SCALING_EXPONENTS).items()},
            )
        except KeyError as e:
            raise ConfigError(
                f"the primitive rates lack the entry {e.args[0]!r} (they need bits and rates; "
                "smc-hmm bench primitives writes them)"
            ) from e
        except (TypeError, ValueError, AttributeError) as e:
            raise ConfigError(
                "the primitive rates are malformed: bits must be an integer and every rate "
                f"a number of operations per second ({e})"
            ) from e


@dataclass
class Prediction:
    """Predicted time of one run: per-party compute, network, and two totals."""

    bits: int
    compute: dict[str, float]
    network_seconds: float
    rounds: int
    bytes_total: int
    latency: float
    bandwidth: float | None
    #: every party computes in turn and every byte crosses the network one after another
    serial_seconds: float
    #: the busiest party's compute and link, perfectly overlapped with everyone else
    parallel_seconds: float

    def to_dict(self) -> dict:
        return {
            "bits": self.bits,
            "compute": dict(sorted(self.compute.items())),
            "network_seconds": self.network_seconds,
            "rounds": self.rounds,
            "bytes_total": self.bytes_total,
            "latency": self.latency,
            "bandwidth": self.bandwidth,
            "serial_seconds": self.serial_seconds,
            "parallel_seconds": self.parallel_seconds,
        }

    def table(self):
        from rich.table import Table

        net = "no bandwidth limit" if self.bandwidth is None else f"{self.bandwidth / 1e6:g} MB/s"
        t = Table(title=f"predicted at {self.bits} bits\n{self.latency * 1e3:g} ms, {net}")
        t.add_column("item")
        t.add_column("seconds", justify="right")
        for party, s in sorted(self.compute.items()):
            t.add_row(f"compute {party}", f"{s:.4f}")
        t.add_row(
            f"network ({self.rounds} rounds, {self.bytes_total} bytes)",
            f"{self.network_seconds:.4f}",
        )
        t.add_row("total, parties in turn", f"{self.serial_seconds:.4f}", style="bold")
        t.add_row("total, fully overlapped", f"{self.parallel_seconds:.4f}")
        return t


class CostModel:
    """Predicts running time from primitive rates and a ledger (see module docstring)."""

    def __init__(self, rates: PrimitiveRates):
        if not isinstance(rates, PrimitiveRates):
            raise InvalidInputError("CostModel needs PrimitiveRates (see measure_rates)")
        self.rates = rates

    def compute_seconds(self, ops: Mapping[str, int], bits: int | None = None) -> float:
        """Time for these operation counts at ``bits`` (default: the measured size)."""
        bits = self.rates.bits if bits is None else bits
        ops = dict(ops)
        exponent_bits = int(ops.pop("multiexp_bits", 0) or 0)
        mults = int(ops.pop("multiexp_mults", 0) or 0)
        native = int(ops.pop("native_mults", 0) or 0)
        if native and "native_mul" in self.rates.rates:  # the native kernel's own rate
            ops["native_mul"] = native
        else:
            mults += native
        if mults or native:  # the multiplications the algorithm spends, each one "add"
            ops.pop("multiexp_terms", None)
            ops["add"] = ops.get("add", 0) + mults
        elif exponent_bits:  # the exponents' real size, not a term count
            ops["multiexp_terms"] = exponent_bits / self.rates.scalar_bits
        scalar_bits = ops.pop("scalar_mul_bits", None)
        inversions = int(ops.pop("invert", 0) or 0)
        if scalar_bits is not None and "invert" in self.rates.rates:
            # what the scalar multiplications really spent: their exponents' bits, and
            # the inversions of negative factors at their own rate
            ops["scalar_mul"] = int(scalar_bits) / self.rates.scalar_bits
            ops["invert"] = inversions
        return sum(float(k) * self.rates.seconds_per(op, bits) for op, k in ops.items())

    @staticmethod
    def network_seconds(
        rounds: int, nbytes: float, latency: float, bandwidth: float | None
    ) -> float:
        """``latency * rounds + bytes / bandwidth`` (no bandwidth: unlimited)."""
        if not (latency >= 0 and math.isfinite(latency)) or (
            bandwidth is not None and not (bandwidth > 0 and math.isfinite(bandwidth))
        ):
            raise InvalidInputError("latency must be a finite number >= 0 and bandwidth > 0")
        return latency * rounds + (0.0 if bandwidth is None else nbytes / bandwidth)

    def predict(
        self,
        report: CostReport,
        *,
        bits: int | None = None,
        latency: float = 0.0,
        bandwidth: float | None = None,
        input_scale: float = 1.0,
        measured_bits: int | None = None,
        speedup: float = 1.0,
    ) -> Prediction:
        """Predict the run of ``report`` at ``bits`` with inputs ``input_scale`` times larger.

        ``speedup``: each party's compute runs on lanes with this measured scaling
        (``smc-hmm bench`` reports the machine's two-lane scaling); 1: one thread.

        Operation counts and bytes scale linearly with ``input_scale``; bytes
        scale linearly with the key size relative to the report's
        (``measured_bits``, default ``report.key_bits``, else the rates' size).
        """
        if not (input_scale > 0 and math.isfinite(input_scale)):
            raise InvalidInputError("input_scale must be a finite number > 0")
        if not (speedup >= 1 and math.isfinite(speedup)):
            raise InvalidInputError("speedup must be a finite number >= 1")
        # a size no key can have would scale the rates to nonsense (0 s, or complex numbers)
        bits = (
            self.rates.bits
            if bits is None
            else check_key_bits(bits, insecure=True, allow_large=True)
        )
        source_bits = measured_bits or report.key_bits or self.rates.bits
        byte_scale = input_scale * bits / source_bits
        compute = {
            name: input_scale * self.compute_seconds(p["ops"], bits) / speedup
            for name, p in report.parties.items()
        }
        total_bytes = report.bytes_total * byte_scale
        busiest = (
            max(
                (max(p["bytes"]["sent"], p["bytes"]["recv"]) for p in report.parties.values()),
                default=0,
            )
            * byte_scale
        )
        rounds = report.rounds
        serial_net = self.network_seconds(rounds, total_bytes, latency, bandwidth)
        parallel_net = self.network_seconds(rounds, busiest, latency, bandwidth)
        return Prediction(
            bits=bits,
            compute=compute,
            network_seconds=serial_net,
            rounds=rounds,
            bytes_total=round(total_bytes),
            latency=latency,
            bandwidth=bandwidth,
            serial_seconds=sum(compute.values()) + serial_net,
            parallel_seconds=max(compute.values(), default=0.0) + parallel_net,
        )
