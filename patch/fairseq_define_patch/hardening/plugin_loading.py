"""A plugin that is not loaded, or a --user-dir that is no plugin: one line naming the fix.

The stock tools read --arch and --task before any --user-dir could help, and gave an
IndexError, a KeyError or an assertion. fairseq knows the fairseq-define plugin's names
(``is_plugin_name``) only to say which --user-dir is missing: the plugin is by definition not
loaded when this message is needed, so it cannot tell fairseq its names itself.
"""

from ..edits import CopiedModule, Edit, FilePatch, insert_after, insert_before, replace_span

# The code is runtime/plugin_names.py (copied into fairseq); each edit calls it where fairseq
# reads the name or the folder.
COPIES = (CopiedModule("plugin_names", "a plugin's names without the plugin; a --user-dir that is no plugin"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/__init__.py",
        "a plugin's name without the plugin: the error names its --user-dir",
        (
            insert_before(
                "# initialize hydra\n",
                "from fairseq._define_runtime.plugin_names import *  # noqa: E402 F401 F403  (fairseq_define)\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/__init__.py",
        "an unknown architecture (a plugin not loaded): a clear error, not an IndexError",
        (
            replace_span(
                "    assert model is not None, (\n",
                '        + f" Requested model type: {model_type}"\n    )\n',
                "    if model is None:  # (fairseq_define)\n        from fairseq import unknown_name_error\n"
                '        raise unknown_name_error("model architecture", model_type, "--arch")\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/tasks/__init__.py",
        "an unknown task (a plugin not loaded): a clear error, not a KeyError",
        (
            Edit(
                "        # legacy tasks\n        task = TASK_REGISTRY[task_name]\n",
                "        # legacy tasks\n        task = TASK_REGISTRY.get(task_name)  # None: reported below\n",
            ),
            replace_span(
                "    assert (\n        task is not None\n",
                "Available hydra tasks: {TASK_DATACLASS_REGISTRY.keys()}\"\n",
                "    if task is None:  # (fairseq_define)\n        from fairseq import unknown_name_error\n"
                '        raise unknown_name_error("task", task_name, "--task")\n',
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/options.py",
        "a plugin's --arch/--task without its --user-dir: say which --user-dir",
        (
            Edit(
                "    usr_args, _ = usr_parser.parse_known_args(input_args)\n    utils.import_user_module(usr_args)\n",
                "    usr_args = import_plugin_and_check_names(usr_parser, input_args)  # (fairseq_define)\n",
            ),
            insert_after(
                "from fairseq.utils import csv_str_list, eval_bool, eval_str_dict, eval_str_list  # noqa\n",
                "from fairseq._define_runtime.plugin_names import check_task_known, import_plugin_and_check_names\n",
            ),
            # fairseq-validate has no default task: a KeyError on None without --task
            Edit(
                "        from fairseq.tasks import TASK_REGISTRY\n\n"
                "        TASK_REGISTRY[args.task].add_args(parser)\n",
                "        from fairseq.tasks import TASK_REGISTRY\n\n"
                "        check_task_known(args.task)  # (fairseq_define) none, or unknown: one line\n"
                "        TASK_REGISTRY[args.task].add_args(parser)\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/utils.py",
        "--user-dir that does not exist or is not a plugin: a clear error",
        (
            Edit(
                "                    raise FileNotFoundError(module_path)\n\n"
                "        # ensure that user modules are only imported once\n",
                "                    raise user_dir_not_found(args.user_dir)  # (fairseq_define)\n\n"
                "        check_user_dir(args.user_dir, module_path)  # (fairseq_define) no plugin\n"
                "        # ensure that user modules are only imported once\n",
            ),
            Edit(
                "from torch import Tensor\n\nif TYPE_CHECKING:\n",
                "from torch import Tensor\n"
                "from fairseq._define_runtime.plugin_names import check_user_dir, user_dir_not_found  # "
                "(fairseq_define)\n\n"
                "if TYPE_CHECKING:\n",
            ),
        ),
    ),
)
