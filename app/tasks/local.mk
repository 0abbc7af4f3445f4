# app/tasks/local.mk: BERT fine-tuning on Megatron's downstream tasks (tasks/main.py: MNLI, RACE):
# their data readers and row builder.
noinst_LIBRARIES += app/tasks/libtasks.a
app_tasks_libtasks_a_SOURCES = \
	app/tasks/task_data.c app/tasks/task_data.h \
	app/tasks/finetune.c app/tasks/finetune.h
app_tasks_libtasks_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
