"""What the demo report writers share: report.md (printed too) and report.json beside the runs,
each written to a temporary and renamed, so a reader never sees half a report."""
import json
import os


def write_report(out, markdown_lines, data):
    for name, text in (("report.md", "\n".join(markdown_lines) + "\n"), ("report.json", json.dumps(data, indent=2))):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))
    print("\n".join(markdown_lines))
