"""The DeFINE settings as the modules take them: the ``--define-*`` flags of a model's config
(DefineConfig fields on an argparse Namespace, a dataclass or an omegaconf config), resolved
once where the model is built into typed, validated options.

Resolving means: choices become plain ``str``, comma-separated lists become int tuples, a
setting a stored config lacks takes DefineConfig's default, the style is the one the unit is
built in (``authors`` only changes the ``define`` transform), and the settings that need no
model size are checked here (one line each, naming the flag and the fix). The widths and
groups, which need the model's width, are checked by the schedules (define_schedule.py,
define_schedule_authors.py).
"""

from dataclasses import dataclass, fields
from typing import Optional, Tuple

from .define_config import DEFAULT_DEFINE_STYLE, DEFAULT_UNIT_GRAD_SCALE, DefineConfig, DefineConfigError, check_positive, parse_int_list

_DEFAULTS = {f.name: f.default for f in fields(DefineConfig)}

# the transforms the authors' code has a counterpart for (projective and none have no DeFINE
# unit for the style to change)
_AUTHORS_TRANSFORMS = ("define", "projective", "none")


@dataclass(frozen=True)
class DefineOptions:
    """One model's DeFINE settings (the flag each field comes from in brackets)."""

    style: str  # paper | authors: the unit's structure (--define-style; paper unless transform is define)
    transform: str  # --define-transform
    map: str  # standard | adaptive (--define-map)
    map_dim: int  # n (--define-map-dim)
    expand_dim: int  # k (--define-expand-dim)
    depth: int  # N (--define-depth)
    out_dim: Optional[int]  # m (--define-out-dim); None: the model's embedding dim
    max_groups: Optional[int]  # g_max (--define-max-groups); None: the schedule's default
    groups: Optional[Tuple[int, ...]]  # groups per Expand layer (--define-groups)
    activation: str  # --define-activation
    norm: str  # --define-norm
    bias: bool  # not --define-no-bias
    dropout: float  # --define-dropout
    map_dropout: float  # --define-map-dropout
    reduce: bool  # not --define-no-reduce
    adaptive_cutoff: Optional[Tuple[int, ...]]  # adaptive map's band cutoffs (--define-adaptive-cutoff)
    adaptive_factor: float  # --define-adaptive-factor
    unit_grad_scale: float  # --define-unit-grad-scale (unset: the style's default)
    unit_centring: str  # batch_mean | none (--define-unit-centring)
    token_path: str  # unique | plain (--define-token-path)
    cached_table: bool  # --define-cached-table

    @classmethod
    def from_config(cls, cfg) -> "DefineOptions":
        """The options of a config holding DefineConfig's fields; raises
        :class:`DefineConfigError` for a setting no model size could make valid."""

        def setting(name):
            return getattr(cfg, name, _DEFAULTS[name])

        transform = str(setting("define_transform"))
        style = str(setting("define_style") or DEFAULT_DEFINE_STYLE)
        if style == "authors":
            _check_authors_settings(transform, setting("define_no_reduce"), setting("define_groups"))
            if transform != "define":
                style = "paper"
        out_dim = setting("define_out_dim")
        if out_dim is not None:
            check_positive("define_out_dim (m)", "--define-out-dim (or leave it out for the model's embedding dim)", out_dim)
        groups = parse_int_list(setting("define_groups"), "--define-groups")
        map_kind = str(setting("define_map"))
        cutoff = setting("define_adaptive_cutoff")
        if cutoff and map_kind != "adaptive":
            raise DefineConfigError(
                "--define-adaptive-cutoff sets the bands of --define-map adaptive, which this model "
                "does not use: drop it (the language models' adaptive input takes --adaptive-cutoff)"
            )
        if map_kind == "adaptive":
            cutoff = parse_int_list(cutoff, "--define-adaptive-cutoff")
            if not cutoff:
                raise DefineConfigError(
                    "--define-map adaptive needs --define-adaptive-cutoff (e.g. 20000,40000,200000)"
                )
        scale = setting("define_unit_grad_scale")
        if scale is None:
            scale = DEFAULT_UNIT_GRAD_SCALE
        if not scale > 0:
            raise DefineConfigError(
                f"--define-unit-grad-scale must be positive, got {scale!r}; 1 trains the unit at the "
                f"optimizer's learning rate; the default, {DEFAULT_UNIT_GRAD_SCALE:g}, is what keeps SGD at lr 30 stable"
            )
        return cls(
            style=style,
            transform=transform,
            map=map_kind,
            map_dim=setting("define_map_dim"),
            expand_dim=setting("define_expand_dim"),
            depth=setting("define_depth"),
            out_dim=out_dim,
            max_groups=setting("define_max_groups"),
            groups=tuple(groups) if groups is not None else None,
            activation=str(setting("define_activation")),
            norm=str(setting("define_norm")),
            bias=not setting("define_no_bias"),
            dropout=setting("define_dropout"),
            map_dropout=setting("define_map_dropout"),
            reduce=not setting("define_no_reduce"),
            adaptive_cutoff=tuple(cutoff) if map_kind == "adaptive" else None,
            adaptive_factor=setting("define_adaptive_factor"),
            unit_grad_scale=float(scale),
            unit_centring=str(setting("define_unit_centring")),
            token_path=str(setting("define_token_path")),
            cached_table=bool(setting("define_cached_table")),
        )


def _check_authors_settings(transform: str, no_reduce: bool, groups: Optional[str]) -> None:
    """Refuse the settings that only the paper style builds (one line each, with the fix)."""
    if transform not in _AUTHORS_TRANSFORMS:
        raise DefineConfigError(
            f"define_transform={transform} is an ablation of the paper's unit (Tables 6 and 8) "
            "with no counterpart in the authors' code; use --define-style paper with it, or "
            "--define-transform define"
        )
    if transform != "define":
        return
    if no_reduce:
        raise DefineConfigError(
            "--define-no-reduce: the authors' unit always ends with its output layer; drop "
            "the flag or use --define-style paper"
        )
    if groups:
        raise DefineConfigError(
            f"--define-groups {groups}: the authors' schedule derives the groups "
            "from g_max; set --define-max-groups instead, or use --define-style paper"
        )
