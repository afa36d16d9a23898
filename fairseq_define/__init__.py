"""DeFINE (Mehta et al., ICLR 2020) for fairseq: ``--user-dir fairseq_define`` or
``import fairseq_define`` registers every model, architecture, task and criterion."""

from fairseq_define_patch import require_patched_fairseq

require_patched_fairseq()

from .errors import register_user_error_messages  # noqa: E402

register_user_error_messages()

from .denormals import flush_denormal_from_env  # noqa: E402

flush_denormal_from_env()

from .modules.config_bounds import register_neutral_model_settings  # noqa: E402

register_neutral_model_settings()

from . import criterions, models, modules, optim, tasks  # noqa: E402,F401
