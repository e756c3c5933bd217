"""nbgrader configuration for the course's exercises (copied into a course directory by
`python tools/make_student_notebooks.py --nbgrader-course DIR`).

Each chapter is an assignment; its source notebooks are the instructor masters, made
classroom-ready by the tool (an install cell, hidden tests, `raises-exception` on check cells).
What the defaults lack:

- the masters' instructor-only cells (tag `instructor`) are dropped from the released version, as
  tools/make_student_notebooks.py drops them from the student copies in the repository;
- a check cell a student deleted is put back at grading (with its hidden tests and a comment
  saying it was missing) and scored like any other, instead of leaving the exercise without a
  score and the notebook waiting for manual grading.
"""

from nbconvert.preprocessors import TagRemovePreprocessor
from nbgrader.converters import GenerateAssignment

c = get_config()  # noqa: F821 (defined by the config loader)

c.CourseDirectory.course_id = "encoders-from-scratch"
c.GenerateAssignment.preprocessors = [
    TagRemovePreprocessor,
    *GenerateAssignment.class_traits()["preprocessors"].default(),
]
c.TagRemovePreprocessor.enabled = True
c.TagRemovePreprocessor.remove_cell_tags = {"instructor"}
c.OverwriteCells.add_missing_cells = True
# Checks run a few small models on CPU; leave room on a slow machine.
c.Execute.timeout = 300
