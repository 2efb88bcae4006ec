"""BERT-flow (Li et al. 2020, arXiv 2011.05864): a Glow-style normalizing flow maps frozen sentence vectors to a
standard Gaussian, trained by maximum likelihood on the fit sentences; the Gaussian codes are then scored by cosine.

Built from zuko's transforms (no hand-written flow). The recipe follows the authors' code (bohanli/BERT-flow:
run_siamese.py's defaults and flow/config/config_l3_d3_w32.json; flow/glow_ops_1x1.py): Glow with 3 levels of depth 3;
one step is ActNorm (per-dimension affine, initialised on the first batch to mean 0 and variance 1), a fixed reversal
of the dimensions (their config's `permutation: true`, which replaces Glow's learned 1x1 convolution) and an additive
coupling (the second half shifted by a ReLU network of width 32 on the first half, its last layer zero-initialised);
a standard normal prior; Adam at learning rate 1e-3, one epoch over the fit sentences, 32 pairs (64 sentences) per
batch, gradients clipped to norm 1. Not kept: their multi-scale split (each later level acts on half the dimensions
of the one before; the factored-out half keeps a fixed N(0, 1) prior), so here every step acts on every dimension,
and the weight decay of 0.01 of their Adam variant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULTS = {"levels": 3, "depth": 3, "width": 32, "lr": 1e-3, "epochs": 1, "batch_size": 64, "clip": 1.0}


@dataclass
class FittedFlow:
    flow: object  # a zuko.flows.Flow mapping vectors x to Gaussian codes z (its transform is x -> z)
    mean_nll: list[float]  # the mean negative log-likelihood per dimension of the fit vectors, per epoch (before, after)
    steps: int

    def forward(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.flow().transform(torch.as_tensor(x, dtype=torch.float32)).numpy()

    def inverse(self, z: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.flow().transform.inv(torch.as_tensor(z, dtype=torch.float32)).numpy()


def _build(dim: int, steps: int, width: int, x0):
    """The Glow stack as zuko transforms; each ActNorm is initialised so that x0 (the first batch) leaves it with mean
    0 and variance 1 per dimension (Glow's data-dependent initialisation)."""
    import torch
    from zuko.distributions import DiagNormal
    from zuko.flows import Flow, GeneralCouplingTransform, UnconditionalDistribution, UnconditionalTransform
    from zuko.transforms import AdditiveTransform, MonotonicAffineTransform, PermutationTransform

    bound = -math.log(1e-3)  # zuko soft-clips an affine log-scale a to a / (1 + |a| / bound): invert it for the init
    layers, h = [], x0
    for _ in range(steps):
        log_scale = (-h.std(0).clamp_min(1e-6).log()).clamp(-0.9 * bound, 0.9 * bound)
        raw = log_scale / (1 - log_scale.abs() / bound)
        actnorm = UnconditionalTransform(MonotonicAffineTransform, -h.mean(0) * log_scale.exp(), raw)
        reverse = UnconditionalTransform(PermutationTransform, torch.arange(dim - 1, -1, -1), buffer=True)
        coupling = GeneralCouplingTransform(dim, mask=torch.arange(dim) < dim // 2, univariate=AdditiveTransform,
                                            shapes=((),), hidden_features=(width, width), activation=torch.nn.ReLU)
        torch.nn.init.zeros_(coupling.hyper[-1].weight)  # each coupling starts as the identity, as in Glow
        torch.nn.init.zeros_(coupling.hyper[-1].bias)
        layers += [t.to(x0.dtype) for t in (actnorm, reverse, coupling)]
        with torch.no_grad():  # the next ActNorm is initialised on this step's output
            for t in layers[-3:]:
                h = t()(h)
    base = UnconditionalDistribution(DiagNormal, torch.zeros(dim), torch.ones(dim), buffer=True)
    return Flow(layers, base).to(x0.dtype)


def fit(vectors: np.ndarray, seed: int = 0, levels: int = 3, depth: int = 3, width: int = 32, lr: float = 1e-3,
        epochs: int = 1, batch_size: int = 64, clip: float = 1.0) -> FittedFlow:
    """Train the flow by maximum likelihood on `vectors` (n x d); same seed, same vectors: same flow, byte for byte
    (seeded initialisation and batch order, one CPU thread: its kernels sum in a fixed order, and on small batches
    one thread is also the fastest)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit(torch.as_tensor(np.asarray(vectors), dtype=torch.float32), seed, levels, depth, width, lr, epochs,
                    batch_size, clip)
    finally:
        torch.set_num_threads(threads)


def _fit(x, seed: int, levels: int, depth: int, width: int, lr: float, epochs: int, batch_size: int,
         clip: float) -> FittedFlow:
    import torch

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # zuko's MLP initialisation draws from the global generator
    first = x[torch.randperm(len(x), generator=gen)[: max(batch_size, 2)]]
    flow = _build(x.shape[1], levels * depth, width, first)
    opt = torch.optim.Adam(flow.parameters(), lr=lr)

    def nll(batch):  # mean negative log-likelihood per dimension
        return -flow().log_prob(batch).mean() / x.shape[1]

    def mean_nll():  # over all fit vectors, in chunks (the stack's activations for 100k vectors would not fit)
        with torch.no_grad():
            return float(sum(nll(c) * len(c) for c in x.split(4096)) / len(x))

    history = [mean_nll()]
    steps = 0
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=gen).split(batch_size):
            loss = nll(x[idx])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(flow.parameters(), clip)
            opt.step()
            steps += 1
        history.append(mean_nll())
    if not all(math.isfinite(v) for v in history):
        raise FloatingPointError(f"flow fit diverged: mean NLL per epoch {history}")
    return FittedFlow(flow, history, steps)
