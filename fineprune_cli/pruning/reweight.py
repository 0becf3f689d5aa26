"""`--reweight cumulative`: RePB's cumulative temporal rescaling (Zhou et al., ICLR 2026,
"Inconsistency Biases in Dynamic Data Pruning"), a setting any policy carries.

Each epoch t a sample's loss weight is s_t x t / c, c the epochs 1..t whose plan kept it: the
inverse of its cumulative selection frequency c / t (the paper's E / N_i(E)), times the
policy's own weight, and s_t one factor for the whole epoch that makes the weights of the
samples it trains sum to N. Why s_t: the paper's own weights make an epoch's expected gradient
the full one only as t grows (0.70 of it in a first epoch of random pruning at f 0.3, 1.15-1.17
in the full epochs between pruned ones: results/reweight/bias.md); with s_t, in every epoch.
Our reading, and why: docs/choices.md ("Cumulative temporal reweighting").
"""

from __future__ import annotations

from ..lazytorch import torch


class CumulativeFrequency:
    """Counts, plan by plan, the epochs that kept each sample, and weights each plan by them
    (`Policy.reweighted_plan` asks it once per plan)."""

    def __init__(self, num_samples: int, device: torch.device):
        self.kept = torch.zeros(num_samples, dtype=torch.float32, device=device)  # c, per sample
        self.epochs = 0  # t: the plans counted
        self.pruned = False  # some plan so far left a sample out (else every c == t)

    def weigh(self, indices: torch.Tensor, pruned: bool, own: torch.Tensor | None) -> torch.Tensor | None:
        """Count an epoch that keeps `indices` (`pruned`: it leaves some sample out) and return
        the loss weights of all N samples, s_t x t / c x the policy's `own`, scaled so that the
        weights of `indices` sum to N; `own` itself while every sample has been kept in every
        epoch (the epoch trains as without the setting)."""
        self.epochs += 1
        now = torch.zeros_like(self.kept, dtype=torch.bool)
        now[indices.to(now.device)] = True  # an epoch keeps a sample once, however often it trains
        self.kept += now
        self.pruned = self.pruned or pruned
        if not self.pruned:
            return own
        # a sample no plan has kept yet (c = 0) trains in no epoch, so its weight is never read
        weights = self.epochs / self.kept.clamp(min=1)
        if own is not None:
            weights = weights * own.to(weights.device, weights.dtype)
        # s_t: the epoch's summed gradient weighs N samples, as a full epoch's does (a sample
        # that trains twice counts twice); float64 so N = 10^6 weights sum without drift
        total = weights[indices.to(weights.device)].double().sum()
        return weights * (self.kept.numel() / total).to(weights.dtype)

    def state_dict(self) -> dict:
        return {"kept": self.kept.clone(), "epochs": self.epochs, "pruned": self.pruned}

    def load_state_dict(self, state: dict) -> None:
        self.kept.copy_(state["kept"])
        self.epochs, self.pruned = int(state["epochs"]), bool(state["pruned"])


def reweighting(kind: str, num_samples: int, device: torch.device) -> CumulativeFrequency | None:
    """The reweighting `--reweight` names; None for none."""
    return CumulativeFrequency(num_samples, device) if kind == "cumulative" else None
