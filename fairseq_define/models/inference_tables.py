"""What every DeFINE model does when a checkpoint is loaded (paper sections 3.4 and 4.3):
rebuild compressed lookup tables (a checkpoint written by ``fairseq-define-compress``) and,
with ``define_cache_on_load``, replace the DeFINE units by cached tables."""

import logging

from ..modules.compression.compositional_codes import restore_compressed_embeddings
from ..modules.define.embedding import cache_define_tables

logger = logging.getLogger(__name__)


class InferenceTablesMixin:
    """Mixed into a fairseq model before its fairseq base class; ``define_options`` returns
    the config holding the DeFINE settings."""

    def define_options(self):
        raise NotImplementedError

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        restored = restore_compressed_embeddings(self, state_dict)
        if restored:
            logger.info("%d lookup table(s) stored as compositional codes", restored)
        result = super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)
        if getattr(self.define_options(), "define_cache_on_load", False):
            size = cache_define_tables(self)
            logger.info("DeFINE units replaced by cached tables (%.2f MB)", size / 2**20)
        return result
