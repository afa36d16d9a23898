from .define.config import DefineConfig, DefineConfigError  # noqa: F401
from .define.embedding import DefineEmbedding, cache_define_tables  # noqa: F401
from .define.group_layer_norm import GroupLayerNorm  # noqa: F401
from .define.group_linear import GroupLinear  # noqa: F401
from .define.options import DefineOptions  # noqa: F401
from .define.schedule import DefineSchedule, build_schedule  # noqa: F401
from .define.schedule_authors import AuthorsSchedule, build_authors_schedule  # noqa: F401
from .define.unit import DefineUnit, split_and_mix  # noqa: F401
from .define.unit_authors import AuthorsDefineUnit  # noqa: F401
