"""The house rules of docs/ARCHITECTURE.md, read from the source with ast: the layers (a module
imports only from its own layer or below, the renderers only the records), no import cycle,
and modules and functions of a size a reader can hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Top to bottom, as ARCHITECTURE draws them: cli > pipeline (the plan and its targets) > the
# runner (with what it drives beside it) > lab/workloads/probes > results and reports > records,
# statistics, units. A module belongs to the first layer with a matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("cli", ("fsbench.cli", "fsbench._entry", "fsbench.__main__")),
    (
        "pipeline",
        (
            "fsbench.pipeline",
            "fsbench.schedule.plan",
            "fsbench.schedule.targets",
            "fsbench.schedule.dryrun",
            "fsbench.tune",
        ),
    ),
    (
        "runner",
        (
            "fsbench.schedule.runner",
            "fsbench.schedule.stalled",
            "fsbench.schedule.closing",
            "fsbench.schedule.sampler",
            "fsbench.schedule.merge",
            "fsbench.schedule.mounted",
            "fsbench.registry",
            "fsbench.environment",
            "fsbench.vm",
        ),
    ),
    (
        "parts",
        (
            "fsbench.lab",
            "fsbench.aging",
            "fsbench.fuse",
            "fsbench.schedule.dimensions",
            "fsbench.host.apt",
            "fsbench.workloads",
            "fsbench.probes",
            "fsbench.services",
        ),
    ),
    ("results", ("fsbench.records.store", "fsbench.report")),
    (
        "records",
        (
            "fsbench.records",  # schema, notecodes, tunerecord, choices, probes/ (store: above)
            "fsbench.stats",
            "fsbench.schedule.phases",
            "fsbench.units",
            "fsbench.errors",
            "fsbench.treehash",
            "fsbench._",  # the native extensions (fsbench._xxhtree, ...)
        ),
    ),
    # fsbench/__init__.py (the version) and the faces of fsbench.schedule and fsbench.host
    ("package", ("fsbench",)),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}  # 0 is the top


def layer(module: str) -> str:
    for name, prefixes in LAYERS:
        if any(
            module == p or module.startswith(p + ".") or (p.endswith("_") and module.startswith(p))
            for p in prefixes
        ):
            return name
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and ARCHITECTURE)")


def _modules() -> dict[str, Path]:
    out = {}
    for p in (SRC / "fsbench").rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The fsbench modules an import statement loads (a name imported from a package may be
    a submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "fsbench"]
    if node.level:
        package = module.split(".")
        if MODULES[module].name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] != "fsbench":
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def imports() -> dict[str, set[str]]:
    """module -> the fsbench modules it imports, at the top or inside a function alike."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(_targets(module, node))
        graph[module] = found - {module}
    return graph


GRAPH = imports()


def test_every_module_has_a_layer() -> None:
    placed = {m: layer(m) for m in MODULES}  # layer() fails naming a module in no layer
    assert "fsbench.pipeline" in placed and len(placed) > 100  # the walk found the package
    assert set(placed.values()) == set(RANK)  # and no layer is left without a module


# Exceptions to the rules below, each to be removed; the lists may only shrink.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def test_no_layer_imports_from_above() -> None:
    wrong = {
        (m, t) for m, targets in GRAPH.items() for t in targets if RANK[layer(t)] < RANK[layer(m)]
    }
    assert wrong - KNOWN_UPWARD == set()
    assert KNOWN_UPWARD - wrong == set(), "fixed: take them off KNOWN_UPWARD"


def test_the_renderers_read_only_the_records() -> None:
    """report/ turns finished `Run` records into text, HTML and plots: it imports the records,
    statistics and units, never the parts that measure."""
    wrong = [
        f"{m} imports {t}"
        for m, targets in GRAPH.items()
        if m.startswith("fsbench.report")
        for t in targets
        if not t.startswith("fsbench.report")
        and layer(t) not in ("records", "package")
        and (m, t) not in KNOWN_UPWARD
    ]
    assert wrong == []


def test_no_import_cycle() -> None:
    # Package __init__ modules that only re-export their submodules are edges like any other.
    state: dict[str, int] = {}  # 1 on the path, 2 done
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(GRAPH.get(m, ())):
            if t not in GRAPH:
                continue  # a native extension
            if state.get(t) == 1:
                cycles.append([*path[path.index(t) :], t])
            elif t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [m])
    found = {tuple(sorted(set(c))) for c in cycles}
    assert found - KNOWN_CYCLES == set()
    assert KNOWN_CYCLES - found == set(), "fixed: take them off KNOWN_CYCLES"


def test_the_runner_and_registry_know_workloads_only_by_their_contract() -> None:
    """Capabilities are typed fields (workloads/base.py Workload): the runner imports no
    workload but the contract, and the registry asks no workload for its class."""
    for core in ("fsbench.schedule.runner", "fsbench.schedule.sampler", "fsbench.schedule.merge"):
        assert {t for t in GRAPH[core] if t.startswith("fsbench.workloads")} <= {
            "fsbench.workloads",
            "fsbench.workloads.base",
        }
    tree = ast.parse(MODULES["fsbench.registry"].read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert not [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "isinstance"]


def test_the_rules_see_a_wrong_import() -> None:
    """The checks above can fail: a made-up lab module importing the pipeline is caught."""
    node = ast.parse("from fsbench.pipeline import execute").body[0]
    assert isinstance(node, ast.ImportFrom)
    (target,) = _targets("fsbench.lab.lab", node)
    assert RANK[layer(target)] < RANK[layer("fsbench.lab.lab")]


# -- size ------------------------------------------------------------------------------------
MAX_MODULE_LINES = 550
MAX_FUNCTION_LINES = 80
# Modules still over the limit, each to be split; the list may only shrink: a module
# that fits is taken off it, and no other may join.
OVERSIZED: set[str] = set()


def test_the_sampler_only_measures() -> None:
    """What makes a sample of its iterations is schedule/merge.py: the sampler stays a page."""
    assert len(MODULES["fsbench.schedule.sampler"].read_text().splitlines()) <= 400


def test_modules_fit_a_reader() -> None:
    long = {m for m, p in MODULES.items() if len(p.read_text().splitlines()) > MAX_MODULE_LINES}
    assert long - OVERSIZED == set(), "split these modules (or say why in ARCHITECTURE)"
    assert OVERSIZED - long == set(), "these fit now: take them off OVERSIZED"


# Functions still over the limit without a stated reason; may only shrink, like OVERSIZED.
LONG_FUNCTIONS: set[str] = set()


def _long_functions() -> set[str]:
    found = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assert node.end_lineno is not None
            if node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES:
                continue
            doc = ast.get_docstring(node) or ""
            if "Long because" not in doc:
                found.add(f"{module}.{node.name}")
    return found


def test_functions_fit_a_screen_or_say_why() -> None:
    """Over 80 lines a function states why in its docstring ("Long because ...")."""
    long = _long_functions()
    assert long - LONG_FUNCTIONS == set()
    assert LONG_FUNCTIONS - long == set(), "these fit now: take them off LONG_FUNCTIONS"


# -- layout: each folder one concept ------------------------------------------------------------
# The packages whose modules are a closed list: a new module there is a decision (say it in
# ARCHITECTURE), and a module that belongs to another concept goes to that package.
LAYOUT: dict[str, set[str]] = {
    # the lab core: backings, images, copies, loops, mounts (a stacked FUSE driver's too), cold
    # caches, drivers, integrity, safety, state
    "fsbench.lab": {
        "backing",
        "cold",
        "drivers",
        "formats",
        "integrity",
        "lab",
        "loops",
        "mounts",
        "ntfsck",
        "safety",
        "stacked",
        "state",
        "subject",
        "system",
    },
    # --age: the recipe, the cache of aged images, what aging did, the lab's side of it
    "fsbench.aging": {"recipe", "formats", "imagecache", "measure", "prepare"},
    # how a FUSE daemon talks to the kernel, and the daemons built from source
    "fsbench.fuse": {"transports", "sourcebuild", "libfuse", "fuse2fs"},
    # the schedule's dimensions beside a workload's variants
    "fsbench.schedule.dimensions": {"placement", "clients", "fio_clients"},
    # the report: its model, the views, the exports and the plots, one style table for all
    "fsbench.report": {"model", "views", "exports", "plots", "style"},
    # the model: the report's face (__init__) and the cells and decisions it builds from
    "fsbench.report.model": {
        "aging",
        "aging_why",
        "answer",
        "comparison",
        "decided",
        "diff",
        "explain",
        "facts",
        "floor",
        "grids",
        "grouping",
        "judge",
        "keys",
        "naming",
        "notes",
        "summary",
        "tune",
        "upgrade",
        "vm_notes",
    },
    # what a reader sees: the terminal, the page, their sections, tune's view
    "fsbench.report.views": {
        "diskmark",
        "html",
        "html_views",
        "integrity",
        "judge",
        "matrix_table",
        "sections",
        "table",
        "tune",
    },
    "fsbench.report.exports": {"export"},  # JSON, CSV per result and per sample, markdown
    "fsbench.report.plots": {
        "figure",
        "latency_plots",
        "matrix_plots",
        "rates",
        "scaling",
        "trace_plots",
    },
}
# The report's rooms, top to bottom: a room imports only the rooms below it (and the style
# table): an export formats the views' records, a view draws the plots, all read the model.
REPORT_ROOMS = [
    "fsbench.report.exports",
    "fsbench.report.views",
    "fsbench.report.plots",
    "fsbench.report.model",
]
MAX_LAB_MODULES = 14


def _package_modules(package: str) -> set[str]:
    prefix = package + "."
    return {
        m[len(prefix) :] for m in MODULES if m.startswith(prefix) and "." not in m[len(prefix) :]
    }


def test_each_folder_holds_its_own_concept() -> None:
    for package, expected in LAYOUT.items():
        assert _package_modules(package) == expected, f"{package}: update LAYOUT and ARCHITECTURE"
    assert len(_package_modules("fsbench.lab")) <= MAX_LAB_MODULES


def _room(module: str) -> int | None:
    return next(
        (i for i, r in enumerate(REPORT_ROOMS) if module == r or module.startswith(r + ".")), None
    )


def test_the_reports_rooms_import_only_downwards() -> None:
    wrong = []
    for m, targets in GRAPH.items():
        mine = _room(m)
        if mine is None:
            continue
        for t in targets:
            theirs = _room(t)
            if theirs is not None and theirs < mine:
                wrong.append(f"{m} imports {t}")
    assert wrong == []
    # The rule can fail: a made-up model module importing a view is caught.
    assert _room("fsbench.report.views.table") < _room("fsbench.report.model.facts")  # type: ignore[operator]


# One way down: aging is built on the lab (it ages an image through the lab's loops, mounts and
# state record, and hands Lab its aged images through lab.subject.AgedImages), the lab on fuse
# (transports, the daemons built from source), a workload on the services it drives. Nothing
# runs back up.
ONE_WAY = [
    ("fsbench.aging", "fsbench.lab"),
    ("fsbench.lab", "fsbench.fuse"),
    ("fsbench.workloads", "fsbench.services"),  # web-serve drives nginx and wrk
]


def _package_imports(low: str, high: str) -> list[str]:
    return [
        f"{m} imports {t}"
        for m, targets in GRAPH.items()
        if m == low or m.startswith(low + ".")
        for t in targets
        if t == high or t.startswith(high + ".")
    ]


def test_lab_aging_fuse_and_services_depend_one_way() -> None:
    for high, low in ONE_WAY:
        assert _package_imports(high, low), f"{high} no longer uses {low}: redraw ONE_WAY"
        assert _package_imports(low, high) == [], f"{low} imports {high}"
    assert _package_imports("fsbench.fuse", "fsbench.aging") == []


def test_apt_fetching_is_neutral() -> None:
    """host/apt.py serves vm/, the FUSE builds and the lab's fetched NTFS checker alike: it
    imports none of them."""
    assert {t for t in GRAPH["fsbench.host.apt"] if t.startswith("fsbench.")} <= {
        t for t in GRAPH["fsbench.host.apt"] if layer(t) == "records"
    }
    users = {m for m, targets in GRAPH.items() if "fsbench.host.apt" in targets}
    fetchers = ("fsbench.vm", "fsbench.fuse", "fsbench.lab.ntfsck")
    assert users and all(m.startswith(fetchers) for m in users), users


def test_no_issue_history_in_the_source() -> None:
    """The source says what is and why; which issue brought it is git's to tell."""
    pattern = re.compile(r"\bissue \d+", re.I)
    found = [
        f"{p.relative_to(SRC)}:{n}"
        for p in (SRC / "fsbench").rglob("*")
        if p.suffix in (".py", ".html", ".c")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


# The formatters: the terminal, the page, the exports (markdown, CSV, JSON). They format
# report/model/'s records and look each outcome up in report/style.py.
FORMATTERS = {
    "fsbench.report.views.table",
    "fsbench.report.views.html",
    "fsbench.report.views.html_views",
    "fsbench.report.exports.export",
    "fsbench.report.views.diskmark",
    "fsbench.report.views.matrix_table",
    "fsbench.report.views.integrity",
}
# The plotters draw what the model decided: they never ask for a verdict themselves.
PLOTTERS = (
    "fsbench.report.plots.rates",
    "fsbench.report.plots.matrix_plots",
    "fsbench.report.plots.latency_plots",
    "fsbench.report.plots.scaling",
    "fsbench.report.plots.trace_plots",
    "fsbench.report.plots.figure",
)
# Every renderer: the formatters, the plotters, the tune record's views and the sections that
# walk them in one order. They import of fsbench only the model (the records they format, and
# what they need of the run, re-exported there: its one source), the style table and each
# other; besides them number formatting, the version on the page and the errors (an unknown
# --format is one line, exit 2).
RENDERERS = {*FORMATTERS, *PLOTTERS, "fsbench.report.views.tune", "fsbench.report.views.sections"}
RENDERER_MAY_IMPORT = {
    "fsbench",  # the version on the page
    "fsbench.report.model",
    "fsbench.report.style",
    "fsbench.units",  # numbers as every output writes them
    "fsbench.errors",
}
# From records/probes/numbers.py only the explanation's number words (fmt_pct, fmt_time).
NUMBER_WORDS = "fsbench.records.probes.numbers"
# What decides: the verdict procedure, its statistics, the records' internals.
DECIDERS = (
    "fsbench.stats.verdict",
    "fsbench.stats.decide",
    "fsbench.stats.describe",
    "fsbench.records.schema",
)
# The calls that ask for a verdict.
ASKS = {"verdict_of", "compare", "latency_verdict", "judge", "verdict", "samples_verdict"}
# Where the report asks: the one place (comparison.py), and what hands every view the run's
# comparisons (decided.py: the stored ones, and any other pair a view sets side by side); the
# diff of two runs (its cells comparison.py's). The model, the explanation, the summary and
# the aging effects read their comparisons from decided.Decided.
ASKERS = {
    "fsbench.report.model.comparison",
    "fsbench.report.model.decided",
    "fsbench.report.model.diff",
}


def _imported_names(module: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _calls(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
    return out


def test_renderers_import_only_the_model_and_the_style_table() -> None:
    for module in sorted(RENDERERS):
        assert module in MODULES, module
        wrong = [
            t
            for t in GRAPH[module]
            if t not in RENDERER_MAY_IMPORT and t not in RENDERERS and t != NUMBER_WORDS
        ]
        assert wrong == [], (module, wrong)
        words = {n for n in _imported_names(module) if n.startswith(NUMBER_WORDS + ".")}
        assert all(n.rsplit(".", 1)[1].startswith("fmt_") for n in words), (module, words)
    for module in FORMATTERS - {"fsbench.report.exports.export"}:
        assert "fsbench.report.model" in GRAPH[module], module


def test_no_renderer_asks_for_a_verdict() -> None:
    """Every renderer: no call that asks for a verdict, no import of what decides one; the
    ratio/mark cell and an outcome's look exist once (comparison.py, style.py)."""
    for module in sorted(RENDERERS):
        asked = _calls(module) & ASKS
        assert not asked, (module, asked)
        deciders = {t for t in GRAPH[module] if t.startswith(DECIDERS)} - {"fsbench.records.schema"}
        assert not deciders, (module, deciders)
        source = MODULES[module].read_text()
        for made_here in ("SYMBOLS[", "STYLES[", "ratio_cell(", 'startswith("✗")'):
            assert made_here not in source, (module, made_here)


def test_the_report_asks_for_verdicts_in_few_places() -> None:
    askers = {m for m in MODULES if m.startswith("fsbench.report") and _calls(m) & ASKS}
    assert askers <= ASKERS, f"read these from decided.Decided: {sorted(askers - ASKERS)}"
    assert "fsbench.report.model.decided" in askers


def test_one_place_asks_for_a_verdict() -> None:
    """fsbench.stats.verdict's procedure is called from report/model/comparison.py alone in
    report/."""
    callers = [
        m
        for m in MODULES
        if m.startswith("fsbench.report")
        and {"fsbench.stats.verdict.judge", "fsbench.stats.verdict.verdict"} & _imported_names(m)
    ]
    assert callers == ["fsbench.report.model.comparison"]


def test_the_rules_see_a_renderer_that_decides() -> None:
    """The renderer rule can fail: a plotter importing the verdict procedure or the grouping
    of results past the model is caught."""
    for line in (
        "from fsbench.stats.verdict import family_of",
        "from fsbench.report.model import naming",
    ):
        node = ast.parse(line).body[0]
        assert isinstance(node, ast.ImportFrom)
        (target,) = _targets("fsbench.report.plots.rates", node)
        assert target not in RENDERER_MAY_IMPORT and target not in RENDERERS, target


def test_the_model_is_free_of_rich_jinja_and_matplotlib() -> None:
    """report/model/ and everything it imports: records and decisions, nothing that draws."""
    seen, todo = set(), ["fsbench.report.model"]
    while todo:
        m = todo.pop()
        if m in seen or m not in MODULES:
            continue
        seen.add(m)
        todo += GRAPH[m]
    drawing = ("rich", "jinja2", "matplotlib", "markupsafe")
    wrong = []
    for m in seen:
        for node in ast.walk(ast.parse(MODULES[m].read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            wrong += [f"{m}: {n}" for n in names if n.split(".")[0] in drawing]
    assert wrong == []


# -- one model of a verdict, in all of fsbench ---------------------------------------------------
# No module outside the report's model (report/model/) and the
# verdict procedure (stats/) computes a ratio, an interval or a mark a reader sees: it reads
# them from the model, or from what the procedure recorded. Read with ast, three ways a module
# computes one:
# - it calls the procedure: a verdict, a centre's interval, an interim look;
PROCEDURE = {
    "fsbench.stats.verdict": {"verdict", "judge", "mark_of"},
    "fsbench.stats.decide": {"look", "printed", "closing", "replan", "planned_n", "precise"},
    "fsbench.stats.describe": {"summarize", "log_interval"},
    "fsbench.report.model.comparison": {
        "verdict_of",
        "compare",
        "samples_verdict",
        "latency_verdict",
        "rates_verdict",
    },
}
# - it divides one centre by another (a ratio the model would print with its interval);
CENTRES = {"center", "centre", "median", "p99", "p99_us"}
CENTRE_CALLS = {"median", "geometric_mean", "gmean", "fmean", "centre_of", "median_of"}
# - it makes a mark or reads one back from text (▲ → "better"): the marks are style.py's.
MARKS = ("▲", "▼", "≈")
# Outside the model, where the procedure itself runs or plans with it: each with its reason,
# and the kinds it may do. The list may only shrink.
PROCEDURE_USERS: dict[str, tuple[set[str], str]] = {
    "fsbench.stats": ({"asks", "ratio"}, "the verdict procedure and its statistics"),
    "fsbench.schedule.runner": (
        {"asks"},
        "the planner: its looks (decide.look, replan; decide.precise for a subject alone) "
        "stop sampling",
    ),
    "fsbench.schedule.closing": ({"asks"}, "the planner's last look (decide.closing)"),
    "fsbench.cli.commands.judge": (
        {"asks"},
        "the procedure as a tool: samples from a file stamped with their family (decide.stamp) "
        "and each result's centre by summarize, as a run's end makes them; its tables and "
        "comparisons are the model's (report/model/judge.py)",
    ),
    "fsbench.tune.outcome": (
        {"asks"},
        "the tune's selection: one family over every candidate × workload decides which "
        "change is confirmed (its planner, as schedule/ uses decide)",
    ),
}
# Sites still computing outside the model: none, and it stays so (a new one moves into the
# model instead of onto this list).
KNOWN_OUTSIDE: set[tuple[str, str]] = set()


def _name(f: ast.expr) -> str:
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _centre(n: ast.expr) -> bool:
    if isinstance(n, ast.Subscript):
        return _centre(n.value)
    if isinstance(n, ast.Call):
        return _name(n.func) in CENTRE_CALLS
    name = _name(n)
    return name in CENTRES or name.endswith(("_center", "_centre", "_median"))


def _uses(tree: ast.AST) -> set[str]:
    """The qualified names a module uses: `from m import f` as m.f, `m.f` through an import."""
    alias: dict[str, str] = {}
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            for a in n.names:
                alias[a.asname or a.name] = f"{n.module}.{a.name}"
                out.add(f"{n.module}.{a.name}")
        elif isinstance(n, ast.Import):
            for a in n.names:
                alias[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in alias:
            out.add(f"{alias[n.value.id]}.{n.attr}")
    return out


def computes(source: str) -> dict[str, list[str]]:
    """What a module's source computes of a verdict, by kind ("asks", "ratio", "mark"), each
    with where."""
    tree = ast.parse(source)
    found: dict[str, list[str]] = {}
    uses = _uses(tree)
    for module, names in PROCEDURE.items():
        for name in sorted(names):
            if f"{module}.{name}" in uses:
                found.setdefault("asks", []).append(f"{module}.{name}")
    for n in ast.walk(tree):
        div = isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
        if div and _centre(n.left) and _centre(n.right):  # type: ignore[attr-defined]
            found.setdefault("ratio", []).append(f"{n.lineno}: {ast.unparse(n)}")
        strings: list[ast.expr] = []
        if isinstance(n, ast.Compare):
            strings = [n.left, *n.comparators]
        elif isinstance(n, ast.Dict):
            strings = [k for k in n.keys if k is not None]
        texts = [c.value for s in strings for c in ast.walk(s) if isinstance(c, ast.Constant)]
        if any(isinstance(t, str) and any(m in t for m in MARKS) for t in texts):
            found.setdefault("mark", []).append(f"{n.lineno}: {ast.unparse(n)}")
    return found


def _the_model() -> set[str]:
    """report/model/: the report's face and the cells and decisions it builds from."""
    return {
        m for m in MODULES if m == "fsbench.report.model" or m.startswith("fsbench.report.model.")
    }


def _allowed(module: str, kind: str) -> bool:
    for prefix, (kinds, _why) in PROCEDURE_USERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and kind in kinds:
            return True
    return (module, kind) in KNOWN_OUTSIDE


def test_no_module_outside_the_model_computes_a_ratio_an_interval_or_a_mark() -> None:
    model = _the_model()
    assert {"fsbench.report.model.decided", "fsbench.report.model.comparison"} <= model
    assert not model & RENDERERS
    wrong, seen = [], set()
    for module, path in sorted(MODULES.items()):
        if module in model:
            continue
        for kind, where in computes(path.read_text()).items():
            seen.add((module, kind))
            if not _allowed(module, kind):
                wrong.append(f"{module} {kind}: {where}")
    assert wrong == [], "read these from the model (report/model/)"
    assert not KNOWN_OUTSIDE, "move the computation into report/model/ instead"
    users = {m for m, _ in seen}
    for prefix in PROCEDURE_USERS:
        assert any(m == prefix or m.startswith(prefix + ".") for m in users), (
            f"{prefix} no longer computes: take it off PROCEDURE_USERS"
        )


def test_the_verdict_rule_sees_a_module_that_computes() -> None:
    """The rule can fail: a made-up lab module that asks for a verdict, divides two centres,
    or reads a mark back from a cell is caught, and one that only reads the model is not."""
    made_up = {
        "asks": "from fsbench.stats.verdict import verdict\nv = verdict(a, b)\n",
        "ratio": "def speed(new, old):\n    return new.center / old.center\n",
        "mark": "def word(cell):\n    return 'better' if '▲' in cell else 'open'\n",
    }
    for kind, source in made_up.items():
        assert kind in computes(source), kind
        assert not _allowed("fsbench.lab.fake", kind)
    assert computes("WORDS = {'▼': 'worse'}\n") == {"mark": ["1: {'▼': 'worse'}"]}
    assert computes("from fsbench.stats import decide\nn = decide.look(x)\n")["asks"]
    reads = "from fsbench.report.model import build\nrow = build(run).tables[0].rows[0].vs\n"
    assert computes(reads) == {}
    assert computes("x = res.center * 2 / n\n") == {}
