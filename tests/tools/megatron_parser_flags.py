#!/usr/bin/env python3
"""megatron_parser_flags.py: every option string of Megatron-LM's argument parser
(megatron/training/arguments.py: add_megatron_arguments), read from its source without
importing it (no torch needed). Two kinds of rows make that parser:
  - group.add_argument('--a', '--a_b', ...) calls in the _add_*_args functions, and
  - ArgumentGroupFactory(SomeConfig, exclude=[...]).build_group(...), which adds one argument per
    field of a dataclass (its bases' fields first): '--field-name', or for a bool field whose
    default is not False, '--no-field-name' and '--disable-field-name' (store_false); a field's
    metadata {"argparse_meta": {"arg_names": [...]}} names it instead. This file repeats that
    logic of megatron/training/argument_utils.py on the dataclasses' syntax trees.
Output: a header naming the commit, then one line per option string:
    SPELLING<TAB>KIND<TAB>FIRST<TAB>GROUP
KIND is flag (takes no value), value (one value), list (nargs + or *), optional (nargs ?);
FIRST is the first spelling of the same argument (the spelling itself for the first).
    python3 tests/tools/megatron_parser_flags.py MEGATRON_GIT_DIR [COMMIT] > tests/data/megatron_parser_flags.txt"""
import ast
import subprocess
import sys

ARGUMENTS = "megatron/training/arguments.py"
# where ArgumentGroupFactory's dataclasses (and their bases) are defined
CLASS_FILES = [
    "megatron/core/model_parallel_config.py",
    "megatron/core/transformer/transformer_config.py",
    "megatron/training/config/common_config.py",
    "megatron/training/config/training_config.py",
    "megatron/training/config/resilience_config.py",
    "megatron/core/fault_injector.py",
]


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True).stdout


def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def keyword(call, name):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def kind_of(action, nargs, is_bool=False):
    if action in ("store_true", "store_false", "store_const", "count", "help", "version") or is_bool:
        return "flag"
    if nargs in ("+", "*") or isinstance(nargs, int) and nargs > 1:
        return "list"
    if nargs == "?":
        return "optional"
    return "value"


class Classes:
    """the dataclasses of CLASS_FILES by name, and their fields as dataclasses.fields() lists them"""

    def __init__(self, git_dir, commit):
        self.defs = {}
        for path in CLASS_FILES:
            tree = ast.parse(git(git_dir, "show", f"{commit}:{path}"))
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.defs.setdefault(node.name, node)

    def fields(self, name):
        node = self.defs.get(name)
        if node is None:
            sys.exit(f"megatron_parser_flags.py: no class {name} in {', '.join(CLASS_FILES)}")
        ordered = {}
        for base in node.bases:  # a base's fields come first (single inheritance in practice)
            if isinstance(base, ast.Name) and base.id in self.defs:
                ordered.update(self.fields(base.id))
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            ann = ast.unparse(stmt.annotation)
            if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar", "KW_ONLY", "dataclasses.KW_ONLY")):
                continue
            field = {"name": stmt.target.id, "annotation": stmt.annotation, "init": True,
                     "default": None, "has_default": stmt.value is not None, "meta": None}
            value = stmt.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
                init = keyword(value, "init")
                field["init"] = literal(init) is not False if init is not None else True
                default = keyword(value, "default")
                field["has_default"] = default is not None
                field["default"] = literal(default) if default is not None else None
                if default is None:
                    field["default"] = "<factory>"  # default_factory: never == False
                metadata = keyword(value, "metadata")
                if isinstance(metadata, ast.Dict):
                    for k, v in zip(metadata.keys, metadata.values):
                        if literal(k) == "argparse_meta" and isinstance(v, ast.Dict):
                            field["meta"] = {literal(mk): mv for mk, mv in zip(v.keys, v.values)}
            elif value is not None:
                field["default"] = literal(value) if literal(value) is not None or ast.unparse(value) == "None" \
                    else "<expression>"
            ordered[field["name"]] = field
        return ordered


def is_bool(annotation):
    """bool, Optional[bool], bool | None: what _extract_type turns into type=bool"""
    text = ast.unparse(annotation).replace(" ", "")
    return text in ("bool", "Optional[bool]", "typing.Optional[bool]", "bool|None", "Union[bool,None]")


def factory_arguments(classes, class_name, exclude):
    """(spellings, kind) per field, as ArgumentGroupFactory.build_group adds them"""
    out = []
    for name, field in classes.fields(class_name).items():
        if name in exclude or not field["init"]:
            continue
        names = ["--" + name.replace("_", "-")]
        boolean = is_bool(field["annotation"])
        action, nargs = None, None
        if boolean:
            # store_true only when the default == False (None, a factory: store_false)
            default = field["default"]
            if not (default is False or default == 0 and default is not None and not isinstance(default, str)):
                names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
            action = "store_true"
        elif ast.unparse(field["annotation"]).replace(" ", "").startswith(("list[", "List[", "Optional[list[",
                                                                            "Optional[List[")) or \
                "list[" in ast.unparse(field["annotation"]) and "|None" in ast.unparse(field["annotation"]).replace(" ", ""):
            nargs = "+"
        meta = field["meta"] or {}
        if "arg_names" in meta:
            names = literal(meta["arg_names"])
        if "action" in meta:
            action = literal(meta["action"])
            boolean = action in ("store_true", "store_false")
        if "nargs" in meta:
            nargs = literal(meta["nargs"])
        out.append((names, kind_of(action, nargs, boolean and action in ("store_true", "store_false", None))))
    return out


def function_arguments(func, classes, titles):
    """the arguments one _add_*_args function adds, in source order"""
    out = []
    local_lists, factories = {}, {}
    group_of = {}  # variable -> group title

    def visit(node):
        for child in ast.iter_child_nodes(node):
            handle(child)
            visit(child)

    def handle(node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            if isinstance(value, ast.List):
                local_lists[target] = literal(value)
            if isinstance(value, ast.Call):
                callee = ast.unparse(value.func)
                if callee == "ArgumentGroupFactory":
                    factories[target] = value
                if callee.endswith("add_argument_group"):
                    title = keyword(value, "title")
                    group_of[target] = literal(title if title is not None else value.args[0])
                if callee.endswith(".build_group"):
                    group_of[target] = build_group_title(value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "add_argument":
                names = [literal(a) for a in node.args]
                if not names or any(not isinstance(n, str) or not n.startswith("-") for n in names):
                    sys.exit(f"megatron_parser_flags.py: line {node.lineno}: add_argument with names that are not "
                             f"literal strings: {ast.unparse(node)[:120]}")
                owner = ast.unparse(node.func.value)
                out.append((names, kind_of(literal(keyword(node, "action")) if keyword(node, "action") is not None
                                           else None, literal(keyword(node, "nargs"))
                                           if keyword(node, "nargs") is not None else None),
                            group_of.get(owner, owner)))
            elif node.func.attr == "build_group":
                factory = node.func.value
                call = factories.get(factory.id) if isinstance(factory, ast.Name) else factory
                if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "ArgumentGroupFactory"):
                    sys.exit(f"megatron_parser_flags.py: line {node.lineno}: build_group on an unknown factory")
                exclude_node = keyword(call, "exclude")
                exclude = []
                if isinstance(exclude_node, ast.Name):
                    exclude = local_lists[exclude_node.id]
                elif exclude_node is not None:
                    exclude = literal(exclude_node)
                title = build_group_title(node)
                for names, kind in factory_arguments(classes, ast.unparse(call.args[0]), set(exclude)):
                    out.append((names, kind, title))

    def build_group_title(call):
        title = keyword(call, "title")
        if title is None and len(call.args) > 1:
            title = call.args[1]
        return literal(title) if title is not None else ""

    visit(func)
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n")[-1].strip())
    git_dir = sys.argv[1]
    commit = git(git_dir, "rev-parse", sys.argv[2] if len(sys.argv) == 3 else "HEAD").strip()
    date = git(git_dir, "show", "-s", "--format=%cs", commit).strip()
    tree = ast.parse(git(git_dir, "show", f"{commit}:{ARGUMENTS}"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = Classes(git_dir, commit)
    order = []
    for node in ast.walk(functions["add_megatron_arguments"]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            order.append((node.lineno, node.func.id))
    rows, seen = [], {}
    for _, name in sorted(order):
        for names, kind, group in function_arguments(functions[name], classes, {}):
            for spelling in names:
                if spelling in seen:
                    sys.exit(f"megatron_parser_flags.py: {spelling} added twice (argparse would refuse it)")
                seen[spelling] = True
                rows.append(f"{spelling}\t{kind}\t{names[0]}\t{group}")
    print(f"# Every option string of Megatron-LM's argument parser (add_megatron_arguments in {ARGUMENTS},")
    print(f"# the ArgumentGroupFactory dataclass groups included), NVIDIA/Megatron-LM commit {commit} ({date}).")
    print("# Generated by tests/tools/megatron_parser_flags.py; one option string per line:")
    print("# SPELLING<TAB>KIND (flag|value|list|optional)<TAB>FIRST SPELLING OF ITS ARGUMENT<TAB>GROUP")
    print(f"# {len(rows)} option strings")
    print("\n".join(rows))


main()
