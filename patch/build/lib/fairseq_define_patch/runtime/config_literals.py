"""Config strings (and a checkpoint's stored config) parsed as plain data, never run by eval().

fairseq 0.12.2 runs eval() on config strings (layer lists such as "[(512, 3)] * 20", booleans,
cutoffs, optimizer betas), and a checkpoint's config is such a string: a file that holds only
strings passes any weights-only loader and then ran code when its model was built.
``parse_config_literal`` computes what eval gave for plain data and refuses the rest, within
bounds. fairseq/utils.py imports it for its eval_str_* helpers (and re-exports it); every
other module of fairseq that calls eval() on a config value (or a data file's line) binds the
name ``eval`` to it (docs/checkpoints.md lists the sites).
"""

import ast

from fairseq import UserError as _UserError

__all__ = ["ConfigLiteralError", "parse_config_literal", "typed_config_list"]


class ConfigLiteralError(_UserError):
    """A config value that is not plain data (added by fairseq_define; a ValueError, and a
    UserError that fairseq's command-line tools print as one line)."""


# What one config string may cost: "[0] * 10**12" or 600 joined copies of "[0] * 1000000"
# would exhaust memory, a long chain of + or - the parser's and the evaluator's recursion
_CONFIG_LITERAL_MAX_ITEMS = 1_000_000  # items (and characters) that its + and * build, together
_CONFIG_LITERAL_MAX_CHARS = 100_000  # length of the string itself
_CONFIG_LITERAL_MAX_DEPTH = 100  # nesting of brackets and operators
_CONFIG_LITERAL_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def parse_config_literal(value):
    """What ``eval(value)`` gives for a config string that is plain data, without running it.

    Accepted: literals (numbers, strings, bytes, None, True, False, tuples, lists, dicts, sets),
    unary + and -, and + - * / between them, which fairseq's own defaults use
    (``"[(512, 10, 5)] + [(512, 3, 2)] * 4"``). Names, calls, attributes, subscripts,
    comprehensions and lambdas raise ConfigLiteralError: running them could run anything; so
    do strings longer than _CONFIG_LITERAL_MAX_CHARS, nested deeper than
    _CONFIG_LITERAL_MAX_DEPTH, or building more than _CONFIG_LITERAL_MAX_ITEMS items in all.
    Like eval, a value that is not a string raises TypeError (callers rely on it)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise TypeError("eval() arg 1 must be a string, bytes or code object")

    def refuse(why):
        shown = value if len(value) <= 120 else value[:117] + "..."
        return ConfigLiteralError(
            f"refusing to evaluate the config value {shown!r}: {why}; a config or checkpoint "
            "may hold only plain values here (numbers, strings, tuples, lists, dicts, and + - * "
            "/ between them), so fix the value or do not use a checkpoint that holds it"
        )

    budget = [_CONFIG_LITERAL_MAX_ITEMS]  # literals are bounded by the string's length

    def spend(items):
        budget[0] -= items
        if budget[0] < 0:
            raise refuse(f"it builds more than {_CONFIG_LITERAL_MAX_ITEMS} items")

    def walk(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [walk(e) for e in node.elts]
            return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {walk(k): walk(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = walk(node.operand)
            if not isinstance(operand, (int, float, complex)):
                raise refuse("a sign applies only to numbers")
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp) and type(node.op) in _CONFIG_LITERAL_OPS:
            left, right = walk(node.left), walk(node.right)
            for seq, n in ((left, right), (right, left)):
                if isinstance(node.op, ast.Mult) and isinstance(seq, (str, bytes, tuple, list)):
                    if isinstance(n, int) and len(seq) * n > _CONFIG_LITERAL_MAX_ITEMS:
                        raise refuse(f"it repeats a sequence beyond {_CONFIG_LITERAL_MAX_ITEMS} items")
                    if isinstance(n, int):
                        spend(len(seq) * max(n, 0))
            sequences = (str, bytes, tuple, list)
            if isinstance(node.op, ast.Add) and isinstance(left, sequences) and isinstance(right, sequences):
                spend(len(left) + len(right))
            try:
                return _CONFIG_LITERAL_OPS[type(node.op)](left, right)
            except (TypeError, ZeroDivisionError, OverflowError) as e:
                raise refuse(str(e)) from None
        what = type(node.op if isinstance(node, (ast.BinOp, ast.UnaryOp)) else node).__name__
        raise refuse(f"{what} is not plain data")

    if len(value) > _CONFIG_LITERAL_MAX_CHARS:
        raise refuse(f"it is {len(value)} characters long, more than {_CONFIG_LITERAL_MAX_CHARS}")
    try:
        tree = ast.parse(value.lstrip(" \t"), mode="eval")
    except (SyntaxError, ValueError) as e:
        raise refuse(f"not a Python literal ({e.__class__.__name__})") from None
    except (RecursionError, MemoryError):  # the parser's own limits: nested far too deep
        raise refuse(f"it is nested deeper than {_CONFIG_LITERAL_MAX_DEPTH} levels") from None
    levels = [(tree.body, 1)]  # measured without recursion, before walk() recurses
    while levels:
        node, depth = levels.pop()
        if depth > _CONFIG_LITERAL_MAX_DEPTH:
            raise refuse(f"it is nested deeper than {_CONFIG_LITERAL_MAX_DEPTH} levels")
        levels.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return walk(tree.body)


def typed_config_list(value, type):
    """fairseq's eval_str_list after the parse: ``value`` (a parsed list, tuple or number) as a
    list of ``type``; for ``int``, a number that is not whole is refused (int() truncated the
    cutoff 10.5 to 10 without a word)."""
    try:
        items = list(value)
    except TypeError:
        items = [value]
    if type is int:
        for item in items:
            if isinstance(item, float) and not item.is_integer():
                raise ConfigLiteralError(
                    "the config value {!r} holds {}, which is not a whole number: give whole numbers "
                    "here (e.g. the cutoffs 20000,60000)".format(value, item)
                )
    return [type(item) for item in items]
