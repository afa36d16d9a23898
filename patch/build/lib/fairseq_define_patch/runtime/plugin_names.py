"""A plugin that is not loaded, or a --user-dir that is no plugin: one line naming the fix.

The stock tools read --arch and --task before any --user-dir could help, and gave an
IndexError, a KeyError or an assertion. fairseq knows the fairseq-define plugin's names
(``is_plugin_name``) only to say which --user-dir is missing: the plugin is by definition not
loaded when this message is needed, so it cannot tell fairseq its names itself.
fairseq/__init__.py exports ``is_plugin_name`` and ``unknown_name_error`` (the registries of
fairseq/models and fairseq/tasks raise it); fairseq/options.py and fairseq/utils.py call the
checks below where they read --arch, --task and --user-dir.
"""

import os

from fairseq import UserError

__all__ = ["is_plugin_name", "unknown_name_error"]


def is_plugin_name(name):
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


def import_plugin_and_check_names(usr_parser, input_args):
    """fairseq/options.py's first pass: import the --user-dir, then check a plugin's --arch or
    --task against what it registered (``check_plugin_names``); the parsed arguments."""
    from fairseq import utils

    usr_parser.add_argument("--arch", default=None)
    usr_parser.add_argument("--task", default=None)
    usr_args, _ = usr_parser.parse_known_args(input_args)
    utils.import_user_module(usr_args)
    check_plugin_names(usr_args)
    return usr_args


def check_plugin_names(usr_args):
    """After the --user-dir is imported (fairseq/options.py): a plugin's --arch or --task that
    no plugin registered gets an error naming the --user-dir."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    for kind, flag, known, name in (
        ("model architecture", "--arch", ARCH_MODEL_REGISTRY, usr_args.arch),
        ("task", "--task", TASK_REGISTRY, usr_args.task),
    ):
        if is_plugin_name(name) and name not in known:
            raise unknown_name_error(kind, name, flag)


def check_task_known(task):
    """fairseq-validate has no default task: a KeyError on None without --task."""
    from fairseq.tasks import TASK_REGISTRY

    if task not in TASK_REGISTRY:
        raise unknown_name_error("task", task, "--task") if task else UserError(
            "no --task: pass --task translation for a translation checkpoint, "
            "--task language_modeling (or the plugin's contiguous_lm) for a language model"
        )


def user_dir_not_found(user_dir):
    """The error for a --user-dir that does not exist (fairseq raised FileNotFoundError)."""
    return UserError(
        "--user-dir {} does not exist: point it at the plugin's "
        "package folder (for fairseq-define: .../fairseq_define)".format(user_dir)
    )


def check_user_dir(user_dir, module_path):
    """A --user-dir folder without __init__.py would import as an empty namespace package; a
    file would be imported by a name that is no module (a ModuleNotFoundError traceback)."""
    if os.path.isfile(module_path):
        folder = os.path.dirname(module_path)
        raise UserError(
            "--user-dir {} is a file: give the plugin's package folder (the folder holding its "
            "__init__.py){}".format(
                user_dir,
                ", did you mean {}?".format(folder) if os.path.isfile(os.path.join(folder, "__init__.py"))
                else " (for fairseq-define: .../fairseq_define)",
            )
        )
    if os.path.isdir(module_path) and not os.path.isfile(os.path.join(module_path, "__init__.py")):
        inner = os.path.join(user_dir, "fairseq_define")
        raise UserError(
            "--user-dir {} is not a plugin (a Python package with an "
            "__init__.py): {}".format(
                user_dir,
                "did you mean {}?".format(inner)
                if os.path.isfile(os.path.join(inner, "__init__.py"))
                else "point it at the plugin's package folder (for fairseq-define: "
                ".../fairseq_define)",
            )
        )
