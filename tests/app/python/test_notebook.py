"""app/python/examples/tour.ipynb runs from top to bottom in a real kernel (nbclient, ipykernel)
and its outputs hold the figures: PNG images, SVG, the highlight's HTML, and the exported files."""

import os
import re

import nbformat
from nbclient import NotebookClient

from conftest import SOURCE

TOUR = os.path.join(SOURCE, "app", "python", "examples", "tour.ipynb")


def test_the_tour_runs_and_shows_its_figures(tmp_path):
    nb = nbformat.read(TOUR, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if o.output_type in ("display_data", "execute_result") and "image/png" in o.data]
    assert len(figures) >= 6, f"{len(figures)} outputs hold a PNG"
    assert sum("image/svg+xml" in o.data for o in figures) >= 5
    assert sum("<iframe srcdoc=" in o.data.get("text/html", "") for o in figures) >= 2  # the highlights, with hover values
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tokens:" in text and "baseline mean loss" in text and "attention.npy" in text
    split = re.search(r"fine-tuning: (\S+) -> (\S+) nats = temperatures (\S+) \+ drift (\S+)", text)
    assert split, text  # the command line's split, within the last printed digit (other BLAS kernels)
    assert all(abs(float(got) - want) <= 2e-4 for got, want in zip(split.groups(), (5.0371, 3.0224, -0.0318, -1.9828))), split.group(0)
    assert os.path.getsize(tmp_path / "tour_heatmap.png") > 1000
    assert (tmp_path / "tour_export" / "heatmaps").is_dir()
