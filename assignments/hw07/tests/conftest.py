"""hw07's own tests: the handout's numbers and memory figures, through the solution and the hidden checks.

The autograder puts checks/ (hw07_checks) and files/ (memprobe) beside the notebook; part1_solution
puts them on the path the same way, for these tests and for gpu_memory_check.py run as a script.
"""
import part1_solution  # noqa: F401  (puts hw07_checks and memprobe on sys.path)
