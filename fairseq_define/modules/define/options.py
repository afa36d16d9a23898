"""The DeFINE settings as the modules take them: the ``--define-*`` flags of a model's config
(DefineConfig fields on an argparse Namespace, a dataclass or an omegaconf config), resolved
and checked once per model, where the model is built, into one frozen object that the model
hands to its DeFINE embedding(s).

Resolving means: the config's DeFINE fields are read into a DefineConfig (a setting a stored
config lacks takes DefineConfig's default, its one home; settings that older code declared,
``REMOVED_SETTINGS``, are not read), choices become plain ``str``, comma-separated lists int
tuples, an unset grad scale its default, and the style the one the unit is built in (the
style's own check refuses what it cannot build; styles.py). The settings that need no
model size are checked here (one line each, naming the flag and the fix); the widths and
groups, which need the model's width, are checked by the style's schedule when the embedding
is built (schedule.py, schedule_authors.py; the size bounds of both styles in
``check_unit_sizes``).
"""

from dataclasses import dataclass, fields
from typing import Optional, Tuple

from .config import (
    DEFAULT_DEFINE_STYLE,
    DEFAULT_UNIT_GRAD_SCALE,
    DefineConfig,
    DefineConfigError,
    check_positive,
    parse_int_list,
)


@dataclass(frozen=True)
class DefineOptions:
    """One model's DeFINE settings (the flag each field comes from in brackets)."""

    style: str  # paper | authors: the unit's structure (--define-style; paper unless the style has the transform)
    transform: str  # --define-transform
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
    unit_grad_scale: float  # --define-unit-grad-scale (unset: DEFAULT_UNIT_GRAD_SCALE)
    unit_centring: str  # batch_mean | none (--define-unit-centring)
    cached_table: bool  # --define-cached-table

    @classmethod
    def from_config(cls, cfg) -> "DefineOptions":
        """The options of a config holding DefineConfig's fields; raises
        :class:`DefineConfigError` for a setting no model size could make valid."""
        from .styles import resolve_style  # the styles' table imports the modules that take these options

        s = read_define_config(cfg)
        transform = str(s.define_transform)
        style = resolve_style(str(s.define_style or DEFAULT_DEFINE_STYLE), transform, s)
        if s.define_out_dim is not None:
            check_positive("define_out_dim (m)", "--define-out-dim (or leave it out for the model's embedding dim)",
                           s.define_out_dim)
        groups = parse_int_list(s.define_groups, "--define-groups")
        scale = DEFAULT_UNIT_GRAD_SCALE if s.define_unit_grad_scale is None else s.define_unit_grad_scale
        if not scale > 0:
            raise DefineConfigError(
                f"--define-unit-grad-scale must be positive, got {scale!r}; 1 trains the unit at the "
                f"optimizer's learning rate; the default, {DEFAULT_UNIT_GRAD_SCALE:g}, is what keeps SGD at lr 30 "
                f"stable"
            )
        return cls(
            style=style,
            transform=transform,
            map_dim=s.define_map_dim,
            expand_dim=s.define_expand_dim,
            depth=s.define_depth,
            out_dim=s.define_out_dim,
            max_groups=s.define_max_groups,
            groups=tuple(groups) if groups is not None else None,
            activation=str(s.define_activation),
            norm=str(s.define_norm),
            bias=not s.define_no_bias,
            dropout=s.define_dropout,
            map_dropout=s.define_map_dropout,
            reduce=not s.define_no_reduce,
            unit_grad_scale=float(scale),
            unit_centring=str(s.define_unit_centring),
            cached_table=bool(s.define_cached_table),
        )


def read_define_config(cfg) -> DefineConfig:
    """The DeFINE fields of ``cfg`` (any model config) as a DefineConfig: a field ``cfg``
    lacks (a config stored before the flag existed) takes DefineConfig's default."""
    return DefineConfig(**{f.name: getattr(cfg, f.name) for f in fields(DefineConfig)
                           if f.name.startswith("define_") and hasattr(cfg, f.name)})
