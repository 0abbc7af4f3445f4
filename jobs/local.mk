# placeholder: the Slurm tooling lands here
