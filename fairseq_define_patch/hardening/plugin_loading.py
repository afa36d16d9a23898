"""A plugin that is not loaded, or a --user-dir that is no plugin: one line naming the fix.

The stock tools read --arch and --task before any --user-dir could help, and gave an
IndexError, a KeyError or an assertion. fairseq knows the fairseq-define plugin's names
(``is_plugin_name``) only to say which --user-dir is missing: the plugin is by definition not
loaded when this message is needed, so it cannot tell fairseq its names itself.
"""

from ..edits import Edit, FilePatch

_PLUGIN_NAMES_HELPER = """def is_plugin_name(name):
    # (added by fairseq_define) an architecture or task the fairseq-define plugin registers
    return isinstance(name, str) and (name.startswith("define_") or name == "contiguous_lm")


def unknown_name_error(kind, name, flag):
    # (added by fairseq_define) the error for a model architecture or task nobody registered
    message = "unknown {} {!r}".format(kind, name)
    if is_plugin_name(name):
        import importlib.util

        spec = importlib.util.find_spec("fairseq_define")
        where = os.path.dirname(spec.origin) if spec and spec.origin else "PATH/TO/fairseq_define"
        return UserError(
            message + ": it comes from the fairseq-define plugin, which is not loaded; pass "
            "--user-dir {} (in Python: import fairseq_define)".format(where)
        )
    return UserError(
        message + ": check {}, or pass the --user-dir of the plugin that defines it".format(flag)
    )
"""

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/__init__.py",
        "a plugin's name without the plugin: the error names its --user-dir",
        (
            Edit(
                'sys.modules["fairseq.progress_bar"] = progress_bar\n\n# initialize hydra\n',
                'sys.modules["fairseq.progress_bar"] = progress_bar\n\n\n'
                + _PLUGIN_NAMES_HELPER
                + "\n\n# initialize hydra\n",
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
                "    # without the plugin gets an error naming the --user-dir\n"
                "    from fairseq import UserError, is_plugin_name, unknown_name_error\n"
                "    from fairseq.tasks import TASK_REGISTRY\n\n"
                "    for kind, flag, known, name in (\n"
                '        ("model architecture", "--arch", ARCH_MODEL_REGISTRY, usr_args.arch),\n'
                '        ("task", "--task", TASK_REGISTRY, usr_args.task),\n'
                "    ):\n"
                "        if is_plugin_name(name) and name not in known:\n"
                "            raise unknown_name_error(kind, name, flag)\n",
            ),
            # fairseq-validate has no default task: a KeyError on None without --task
            Edit(
                "        from fairseq.tasks import TASK_REGISTRY\n\n"
                "        TASK_REGISTRY[args.task].add_args(parser)\n",
                "        from fairseq.tasks import TASK_REGISTRY\n\n"
                "        if args.task not in TASK_REGISTRY:\n"
                "            raise unknown_name_error(\"task\", args.task, \"--task\") if args.task else UserError(\n"
                "                \"no --task: pass --task translation for a translation checkpoint, \"\n"
                "                \"--task language_modeling (or the plugin's contiguous_lm) for a language model\"\n"
                "            )\n"
                "        TASK_REGISTRY[args.task].add_args(parser)  # (fairseq_define) known\n",
            ),
        ),
    ),
    FilePatch(
        "fairseq",
        "fairseq/utils.py",
        "--user-dir that does not exist or is not a plugin: a clear error",
        (
            Edit(
                "                else:\n"
                "                    raise FileNotFoundError(module_path)\n",
                "                else:\n"
                "                    from fairseq import UserError\n\n"
                "                    raise UserError(\n"
                '                        "--user-dir {} does not exist: point it at the plugin\'s "\n'
                '                        "package folder (for fairseq-define: .../fairseq_define)".format(\n'
                "                            args.user_dir\n"
                "                        )\n"
                "                    )\n"
                "        if os.path.isdir(module_path) and not os.path.isfile(\n"
                '            os.path.join(module_path, "__init__.py")\n'
                "        ):  # (fairseq_define) it would import as an empty namespace package\n"
                "            from fairseq import UserError\n\n"
                '            inner = os.path.join(args.user_dir, "fairseq_define")\n'
                "            raise UserError(\n"
                '                "--user-dir {} is not a plugin (a Python package with an "\n'
                '                "__init__.py): {}".format(\n'
                "                    args.user_dir,\n"
                '                    "did you mean {}?".format(inner)\n'
                '                    if os.path.isfile(os.path.join(inner, "__init__.py"))\n'
                '                    else "point it at the plugin\'s package folder (for fairseq-define: "\n'
                '                    ".../fairseq_define)",\n'
                "                )\n"
                "            )\n",
            ),
        ),
    ),
)
