from .define_config import DefineConfig, DefineConfigError  # noqa: F401
from .define_options import DefineOptions  # noqa: F401
from .define_schedule import DefineSchedule, build_schedule  # noqa: F401
from .define_embedding import DefineEmbedding, cache_define_tables  # noqa: F401
from .define_unit import DefineUnit, split_and_mix  # noqa: F401
from .group_linear import GroupLinear  # noqa: F401
from .define_schedule_authors import AuthorsSchedule, build_authors_schedule  # noqa: F401
from .define_unit_authors import AuthorsDefineUnit  # noqa: F401
from .group_layer_norm import GroupLayerNorm  # noqa: F401
