module github.com/cocoonbox/cocoonbox/api

go 1.26
