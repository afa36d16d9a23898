"""Compositional code compression of lookup tables (Shu & Nakayama, ICLR 2018), which the
paper applies to DeFINE and to standard embeddings in Table 5 (section 4.3, "32 x 16
coding").

Row w of a table E [V, d] is stored as M codes c_w in {0..K-1} (M log2 K bits) and rebuilt
as the sum of one vector from each of M codebooks A [M, K, d]: E'_w = sum_i A_i[c_w,i].
Learning the codes (``learn_codes``) starts from random codes or from Shu & Nakayama's
autoencoder (a Gumbel-softmax code layer between a tanh encoder and the codebooks, trained
to reconstruct E), then alternates two exact steps, each of which can only lower the
reconstruction error: the codebooks refitted by least squares for the codes, and each row's
code in one codebook at a time set to its best value given the others (iterated conditional
modes, as in additive quantization, Babenko & Lempitsky 2014). Measured on trained tables
(docs/inference.md, "Compression"), the refinement matters far more than the start: the autoencoder
leaves half of each codebook's codes unused after thousands of steps, and random codes
refined reach a lower error in seconds, so they are the default start.

``CompositionalEmbedding`` is a drop-in ``nn.Embedding``: lookups and ``.weight`` (for a
softmax tied to the table) decode on the fly. ``compress_embeddings`` replaces every table
of a model; ``restore_compressed_embeddings`` rebuilds that layout from a state dict when a
compressed checkpoint is loaded.
"""

import logging
import math
from typing import Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules.adaptive_softmax import TiedLinear as AdaptiveSoftmaxTiedLinear

logger = logging.getLogger(__name__)


def coded_bytes(rows: int, dim: int, n_codebooks: int, n_codes: int, value_bytes: int = 4, packed: bool = True) -> int:
    """Size of a [rows, dim] table as codes (log2 K bits each when packed, else a byte) and
    codebooks [M, K, dim]."""
    bits = math.ceil(math.log2(n_codes)) if packed else 8
    return math.ceil(rows * n_codebooks * bits / 8) + n_codebooks * n_codes * dim * value_bytes


class CompositionalEmbedding(nn.Module):
    """An [V, d] table as codes [V, M] (uint8) and codebooks [M, K, d]."""

    def __init__(self, num_embeddings: int, embedding_dim: int, n_codebooks: int, n_codes: int, padding_idx=None):
        super().__init__()
        if not 2 <= n_codes <= 256:
            raise ValueError(f"codes per codebook must be in 2..256 (stored as uint8), got {n_codes}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.n_codebooks, self.n_codes, self.padding_idx = n_codebooks, n_codes, padding_idx
        self.register_buffer("codes", torch.zeros(num_embeddings, n_codebooks, dtype=torch.uint8))
        self.codebooks = nn.Parameter(torch.zeros(n_codebooks, n_codes, embedding_dim))

    def train(self, mode: bool = True):
        # codes are fixed integers: training would move only the codebooks of a model whose
        # tables are approximations, so fairseq-train refuses before its first step (as it
        # refuses cached DeFINE tables)
        if mode:
            from ...errors import UserError

            raise UserError(
                "this model holds tables compressed to compositional codes (fairseq-define-compress), "
                "which are for inference only; train or fine-tune from the checkpoint before compression"
            )
        return super().train(mode)

    def _rows(self, ids: torch.Tensor) -> torch.Tensor:
        codes = self.codes[ids].long()  # [*, M]
        out = self.codebooks[0][codes[..., 0]]  # [*, d]
        for i in range(1, self.n_codebooks):  # one codebook at a time: peak memory [*, d]
            out = out + self.codebooks[i][codes[..., i]]
        if self.padding_idx is not None:
            out = out.masked_fill(ids.eq(self.padding_idx).unsqueeze(-1), 0.0)  # as nn.Embedding's zero row
        return out

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._rows(tokens)  # [*, d]

    @property
    def weight(self) -> torch.Tensor:
        """The decoded table [V, d] (for output layers tied to this table); kept between
        calls in evaluation, while the codebooks do not change."""
        key = (self.codebooks._version, self.codebooks.device, self.codebooks.dtype)
        if not self.training and not torch.is_grad_enabled() and getattr(self, "_decoded_key", None) == key:
            return self._decoded
        table = self._rows(torch.arange(self.num_embeddings, device=self.codes.device))
        if not self.training and not torch.is_grad_enabled():
            self._decoded, self._decoded_key = table, key
        return table

    def storage_bytes(self, packed: bool = True) -> int:
        """Bytes of the codes (packed to log2 K bits each, or as stored) and codebooks."""
        return coded_bytes(self.num_embeddings, self.embedding_dim, self.n_codebooks, self.n_codes,
                           self.codebooks.element_size(), packed)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}, codes={self.n_codebooks}x{self.n_codes}"


class CodeLearner(nn.Module):
    """Shu & Nakayama's autoencoder: e [B, d] -> tanh hidden (M K / 2) -> softplus
    [B, M, K] -> Gumbel-softmax one-hots -> sum of codebook rows."""

    def __init__(self, dim: int, n_codebooks: int, n_codes: int):
        super().__init__()
        self.M, self.K = n_codebooks, n_codes
        hidden = max(n_codebooks * n_codes // 2, 1)
        self.encoder = nn.Sequential(
            nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, n_codebooks * n_codes), nn.Softplus()
        )
        self.codebooks = nn.Parameter(torch.randn(n_codebooks, n_codes, dim) * dim**-0.5)

    def log_alpha(self, e):
        return torch.log(self.encoder(e).view(-1, self.M, self.K) + 1e-8)  # [B, M, K]

    def forward(self, e, tau: float = 1.0):
        one_hot = F.gumbel_softmax(self.log_alpha(e), tau=tau, hard=False)  # [B, M, K]
        return torch.einsum("bmk,mkd->bd", one_hot, self.codebooks)  # [B, d]

    @torch.no_grad()
    def codes(self, table, chunk: int = 8192):
        return torch.cat([self.log_alpha(part).argmax(-1) for part in table.split(chunk)])  # [V, M]


def fit_codebooks(table: torch.Tensor, codes: torch.Tensor, n_codes: int, ridge: float = 1e-6) -> torch.Tensor:
    """Least-squares codebooks [M, K, d] for fixed codes [V, M]: min ||D A - E||^2 with D the
    [V, M K] one-hot code matrix, through the normal equations. D is never built: D^T D
    counts code pairs and D^T E sums rows by code (memory M K x (M K + d))."""
    V, M = codes.shape
    K = n_codes
    flat = codes.long() + torch.arange(M) * K  # [V, M]: column of each code in D
    gram = torch.zeros(M * K, M * K, dtype=table.dtype)
    for i in range(M):
        for j in range(M):
            pairs = torch.bincount(codes[:, i].long() * K + codes[:, j].long(), minlength=K * K)
            gram[i * K:(i + 1) * K, j * K:(j + 1) * K] = pairs.view(K, K).to(table.dtype)
    rhs = torch.zeros(M * K, table.size(1), dtype=table.dtype)
    for i in range(M):
        rhs.index_add_(0, flat[:, i], table)  # [M K, d]
    # D^T D is singular (each codebook's one-hot columns sum to the same all-ones column):
    # the ridge makes it positive definite, so the solution is unique and stable
    gram += max(ridge, 1e-9) * torch.eye(M * K, dtype=table.dtype)
    A = torch.linalg.solve(gram, rhs)  # [M K, d]
    return A.view(M, K, -1)


def reconstruction_error(table: torch.Tensor, codes: torch.Tensor, codebooks: torch.Tensor) -> float:
    """||E' - E|| / ||E|| of the table rebuilt from ``codes`` [V, M] and ``codebooks`` [M, K, d]."""
    rebuilt = sum(codebooks[i][codes[:, i].long()] for i in range(codes.size(1)))  # [V, d]
    return ((rebuilt - table).norm() / table.norm().clamp(min=1e-12)).item()


def refine_codes(table: torch.Tensor, codes: torch.Tensor, n_codes: int, rounds: int = 20,
                 tol: float = 1e-3, progress: bool = False) -> Tuple[torch.Tensor, torch.Tensor, List[float]]:
    """Alternate least-squares codebooks and one ICM sweep over the codebooks, ``rounds``
    times or until a round lowers the error by less than ``tol`` of it. Returns codes [V, M]
    (long), codebooks [M, K, d] and the error after the first fit and after every round
    (non-increasing: each step keeps the current solution among its candidates)."""
    table = table.double()
    codes = codes.long().clone()
    M = codes.size(1)
    codebooks = fit_codebooks(table, codes, n_codes)  # [M, K, d]
    errors = [reconstruction_error(table, codes, codebooks)]
    bar = None
    if progress and rounds > 0:
        from tqdm import tqdm

        bar = tqdm(total=rounds, desc=f"refine codes for [{table.size(0)}, {table.size(1)}]", unit="round")
    for _ in range(rounds):
        residual = table - sum(codebooks[i][codes[:, i]] for i in range(M))  # [V, d]
        for i in range(M):
            residual += codebooks[i][codes[:, i]]  # [V, d]: what codebook i has to explain
            # ||r - a_k||^2 without the ||r||^2 every code shares
            cost = (codebooks[i] * codebooks[i]).sum(-1) - 2 * residual @ codebooks[i].T  # [V, K]
            codes[:, i] = cost.argmin(-1)
            residual -= codebooks[i][codes[:, i]]
        codebooks = fit_codebooks(table, codes, n_codes)
        errors.append(reconstruction_error(table, codes, codebooks))
        if bar is not None:
            bar.update()
            bar.set_postfix(error=f"{errors[-1]:.4f}")
        if errors[-2] - errors[-1] < tol * errors[-2]:
            break
    if bar is not None:
        bar.close()
    return codes, codebooks, errors


def autoencoder_codes(table: torch.Tensor, n_codebooks: int, n_codes: int, steps: int, batch_size: int = 128,
                      lr: float = 1e-3, seed: int = 1, progress: bool = False) -> torch.Tensor:
    """Codes [V, M] from Shu & Nakayama's autoencoder trained ``steps`` batches on ``table``."""
    V, d = table.shape
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        learner = CodeLearner(d, n_codebooks, n_codes)
        opt = torch.optim.Adam(learner.parameters(), lr=lr)
        iterator = range(steps)
        if progress:
            from tqdm import tqdm

            iterator = tqdm(iterator, desc=f"autoencoder for [{V}, {d}]", unit="step")
        for _ in iterator:
            batch = table[torch.randint(V, (min(batch_size, V),), generator=gen)]  # [B, d]
            loss = (learner(batch) - batch).pow(2).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return learner.codes(table)  # [V, M]


CODE_INITS = ("random", "autoencoder")


def learn_codes(table: torch.Tensor, n_codebooks: int = 32, n_codes: int = 16, init: str = "random",
                steps: int = 2000, refine_rounds: int = 20, batch_size: int = 128, lr: float = 1e-3,
                seed: int = 1, progress: bool = False) -> Tuple[torch.Tensor, torch.Tensor, float]:
    """Codes [V, M] (uint8) and codebooks [M, K, d] that reconstruct ``table`` [V, d]; returns
    them with the relative reconstruction error ||E' - E|| / ||E||. ``init`` is where the codes
    start (``steps`` autoencoder batches for "autoencoder"); ``refine_rounds`` alternations of
    least squares and ICM follow (0: the start's codes with least-squares codebooks)."""
    if init not in CODE_INITS:
        raise ValueError(f"unknown code initialisation {init!r}; use one of {', '.join(CODE_INITS)}")
    table = table.detach().float().cpu()
    V, d = table.shape
    if init == "autoencoder":
        codes = autoencoder_codes(table, n_codebooks, n_codes, steps, batch_size, lr, seed, progress)
    else:
        codes = torch.randint(n_codes, (V, n_codebooks), generator=torch.Generator().manual_seed(seed))
    codes, codebooks, errors = refine_codes(table, codes, n_codes, refine_rounds, progress=progress)
    logger.info("[%d, %d]: relative error %s (%s codes, then %d refinement rounds)", V, d,
                " -> ".join(f"{e:.4f}" for e in (errors if len(errors) <= 4 else [errors[0], errors[-1]])),
                init, len(errors) - 1)
    return codes.to(torch.uint8), codebooks.float(), errors[-1]


def _replace_module(model: nn.Module, old: nn.Module, new: nn.Module) -> None:
    """Put ``new`` wherever ``old`` is a child (a shared table has several parents)."""
    for module in model.modules():
        for name, child in list(module._modules.items()):
            if child is old:
                module._modules[name] = new


class TiedLinear(nn.Module):
    """An output projection tied to a compressed table: logits against its decoded rows."""

    def __init__(self, table: CompositionalEmbedding):
        super().__init__()
        object.__setattr__(self, "table", table)  # registered (and saved) where the table lives

    @property
    def weight(self):
        return self.table.weight

    def forward(self, x):
        return F.linear(x, self.table.weight)


def _retie(model: nn.Module, old_weight: torch.Tensor, table: CompositionalEmbedding) -> None:
    """Linear layers that shared the old table's weight now read the compressed table."""
    for module in list(model.modules()):
        for name, child in list(module._modules.items()):
            if isinstance(child, nn.Linear) and child.weight is old_weight:
                if child.bias is not None:
                    raise ValueError(f"cannot tie {name} (it has a bias) to a compressed table")
                module._modules[name] = TiedLinear(table)
            elif isinstance(child, AdaptiveSoftmaxTiedLinear) and child.weight is old_weight and not child.transpose:
                # fairseq's adaptive softmax tied to an adaptive input's band table
                module._modules[name] = TiedLinear(table)


def embedding_tables(model: nn.Module, n_codebooks: int, n_codes: int) -> Dict[str, nn.Embedding]:
    """The token tables of the model (shared ones once) that codes would make smaller.
    Exactly ``nn.Embedding``: subclasses such as fairseq's learned positional embeddings take
    other arguments and are not token tables."""
    tables = {}
    for name, m in model.named_modules():
        if type(m) is not nn.Embedding:
            continue
        coded = coded_bytes(m.num_embeddings, m.embedding_dim, n_codebooks, n_codes, m.weight.element_size())
        if coded < m.weight.numel() * m.weight.element_size():
            tables[name] = m
        else:
            logger.info("%s [%d, %d]: kept as is (codes would not make it smaller)", name, *m.weight.shape)
    return tables


def compress_embeddings(model: nn.Module, n_codebooks: int = 32, n_codes: int = 16, progress: bool = False,
                        **kwargs) -> List[dict]:
    """Replace every lookup table of ``model`` by a compositional-code table; returns one
    report per table (name, shape, bytes before/after, relative reconstruction error).
    ``kwargs`` go to ``learn_codes`` (init, steps, refine_rounds, seed)."""
    reports = []
    for name, emb in embedding_tables(model, n_codebooks, n_codes).items():
        codes, codebooks, error = learn_codes(emb.weight, n_codebooks, n_codes, progress=progress, **kwargs)
        table = CompositionalEmbedding(emb.num_embeddings, emb.embedding_dim, n_codebooks, n_codes, emb.padding_idx)
        table.codes.copy_(codes)
        table.codebooks.data.copy_(codebooks)
        table = table.to(emb.weight.device)
        _retie(model, emb.weight, table)
        _replace_module(model, emb, table)
        reports.append(
            dict(
                name=name,
                shape=tuple(emb.weight.shape),
                before=emb.weight.numel() * emb.weight.element_size(),
                after=table.storage_bytes(),
                error=error,
            )
        )
        logger.info("%s [%d, %d]: relative reconstruction error %.4f", name, *emb.weight.shape, error)
    return reports


def _checked_codes(key: str, codes, codebooks, emb: nn.Embedding):
    """(M, K) of a stored table: codes [V, M] of uint8, each below K, codebooks [M, K, d];
    anything else is a damaged or crafted file (an index past K read other memory's rows)."""
    from ...errors import UserError

    ok = (
        isinstance(codes, torch.Tensor) and isinstance(codebooks, torch.Tensor)
        and codes.dtype == torch.uint8 and codes.dim() == 2 and codebooks.dim() == 3
        and codes.size(0) == emb.num_embeddings and codes.size(1) == codebooks.size(0)
        and codebooks.size(2) == emb.embedding_dim and 2 <= codebooks.size(1) <= 256
    )
    if ok and codes.numel() and int(codes.max()) >= codebooks.size(1):
        raise UserError(f"the checkpoint is damaged: {key} holds code {int(codes.max())} but its codebooks have "
                        f"{codebooks.size(1)} codes; use an intact copy, or compress the trained checkpoint again")
    if not ok:
        raise UserError(f"the checkpoint is damaged: {key} (and its .codebooks) do not form a compressed "
                        f"[{emb.num_embeddings}, {emb.embedding_dim}] table; use an intact copy, or compress "
                        "the trained checkpoint again")
    return codes.size(1), codebooks.size(1)


def restore_compressed_embeddings(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> int:
    """Before loading a compressed checkpoint into a freshly built model: turn the tables
    whose state is ``<path>.codes`` / ``<path>.codebooks`` into compressed ones. Returns how
    many were restored."""
    modules = dict(model.named_modules())
    restored = 0
    for key, codes in state_dict.items():
        if not key.endswith(".codes"):
            continue
        path = key[: -len(".codes")]
        emb = modules.get(path)
        if type(emb) is not nn.Embedding:
            continue
        M, K = _checked_codes(key, codes, state_dict.get(path + ".codebooks"), emb)
        table = CompositionalEmbedding(emb.num_embeddings, emb.embedding_dim, M, K, emb.padding_idx)
        table = table.to(emb.weight.device)
        _retie(model, emb.weight, table)
        _replace_module(model, emb, table)
        restored += 1
    return restored
