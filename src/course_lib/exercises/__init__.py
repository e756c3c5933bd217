"""Self-checking exercises: each `check_*` runs the learner's function on fresh inputs and says
precisely what is wrong (which rate is off, which shape), raising `ExerciseError` if anything is."""

from course_lib.exercises.core import ExerciseError, run_learner_code

__all__ = ["ExerciseError", "run_learner_code"]
