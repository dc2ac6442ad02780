module github.com/cocoonbox/cocoonbox

go 1.26
