#!/bin/bash
{ id -un; id -Gn; } >/app/who.txt
