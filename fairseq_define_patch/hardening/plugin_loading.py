"""A plugin that is not loaded, or a --user-dir that is no plugin: one line naming the fix.

The stock tools read --arch and --task before any --user-dir could help, and gave an
IndexError, a KeyError or an assertion. fairseq knows the fairseq-define plugin's names
(``is_plugin_name``) only to say which --user-dir is missing: the plugin is by definition not
loaded when this message is needed, so it cannot tell fairseq its names itself.
"""

from ..edits import CopiedModule, Edit, FilePatch

# The code is runtime/plugin_names.py (copied into fairseq); each edit calls it where fairseq
# reads the name or the folder.
COPIES = (CopiedModule("plugin_names", "a plugin's names without the plugin; a --user-dir that is no plugin"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/__init__.py",
        "a plugin's name without the plugin: the error names its --user-dir",
        (
            Edit(
                'sys.modules["fairseq.progress_bar"] = progress_bar\n\n# initialize hydra\n',
                'sys.modules["fairseq.progress_bar"] = progress_bar\n\n'
                "from fairseq._define_runtime.plugin_names import *  # noqa: E402 F401 F403  (fairseq_define)\n\n"
                "# initialize hydra\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/models/__init__.py",
        "an unknown architecture (a plugin not loaded): a clear error, not an IndexError",
        (
            Edit(
                "    assert model is not None, (\n"
                '        f"Could not infer model type from {cfg}. "\n'
                '        "Available models: {}".format(MODEL_DATACLASS_REGISTRY.keys())\n'
                '        + f" Requested model type: {model_type}"\n'
                "    )\n",
                "    if model is None:\n"
                "        from fairseq import unknown_name_error\n\n"
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
            Edit(
                "    assert (\n"
                "        task is not None\n"
                '    ), f"Could not infer task type from {cfg}. Available argparse tasks: '
                '{TASK_REGISTRY.keys()}. Available hydra tasks: {TASK_DATACLASS_REGISTRY.keys()}"\n',
                "    if task is None:\n"
                "        from fairseq import unknown_name_error\n\n"
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
                "    usr_args, _ = usr_parser.parse_known_args(input_args)\n"
                "    utils.import_user_module(usr_args)\n",
                "    usr_parser.add_argument(\"--arch\", default=None)\n"
                "    usr_parser.add_argument(\"--task\", default=None)\n"
                "    usr_args, _ = usr_parser.parse_known_args(input_args)\n"
                "    utils.import_user_module(usr_args)  # (fairseq_define) then: a plugin's name\n"
                "    from fairseq._define_runtime.plugin_names import check_plugin_names, check_task_known\n\n"
                "    check_plugin_names(usr_args)  # without the plugin: an error naming its --user-dir\n",
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
                "from fairseq._define_runtime.plugin_names import check_user_dir, user_dir_not_found  # (fairseq_define)\n\n"
                "if TYPE_CHECKING:\n",
            ),
        ),
    ),
)
