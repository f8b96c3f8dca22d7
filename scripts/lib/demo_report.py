"""What the demo report writers share: reading each seed's summary.json of a run, and writing
report.md (printed too) and report.json beside the runs, each written to a temporary and renamed,
so a reader never sees half a report."""
import json
import os


def read_runs(out, name, seeds):
    """The summaries of the finished runs OUT/NAME_seedK (a missing one is skipped), each with its seed."""
    runs = []
    for seed in seeds:
        path = os.path.join(out, f"{name}_seed{seed}", "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                runs.append(dict(json.load(f), seed=seed))
    return runs


def write_report(out, markdown_lines, data):
    for name, text in (("report.md", "\n".join(markdown_lines) + "\n"), ("report.json", json.dumps(data, indent=2))):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))
    print("\n".join(markdown_lines))
